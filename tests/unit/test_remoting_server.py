"""The server dispatcher, the push hub and the shared periodic loop, without a network."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable

import pytest

from rocketspark.protocol.codes import Flag, RequestCode, ResponseCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.remoting.admission import SMALL_REQUEST_BYTES, Ticket
from rocketspark.remoting.lifecycle import every_ms_on_loop
from rocketspark.remoting.server import Dispatcher, PushHub
from rocketspark.remoting.streams import serve_stream

PULL = {"topic": "t", "queueId": 0, "queueOffset": 0}  # a pull request's required fields


class FakeChannel:
    """A connection as handlers see it (``rocketspark.remoting.server.Channel``)."""

    def __init__(self) -> None:
        self.pushed: list[RemotingCommand] = []
        self.closers: list[Callable[[], None]] = []

    @property
    def peer(self) -> str:
        return "127.0.0.1:1"

    def push(self, command: RemotingCommand) -> bool:
        self.pushed.append(command)
        return True

    def on_close(self, callback: Callable[[], None]) -> None:
        self.closers.append(callback)

    def close(self) -> None:
        for callback in self.closers:
            callback()


def serve(dispatcher: Dispatcher, request: RemotingCommand, body_bytes: int = 0) -> RemotingCommand:
    accepted = dispatcher.accept(request, body_bytes)
    if isinstance(accepted, RemotingCommand):
        return accepted
    return asyncio.run(dispatcher.serve(request, accepted))


async def collect(dispatcher: Dispatcher, request: RemotingCommand) -> list[RemotingCommand]:
    accepted = dispatcher.accept(request, 0)
    if isinstance(accepted, RemotingCommand):
        return [accepted]
    return [r async for r in serve_stream(dispatcher, request, accepted)]


def test_an_unknown_code_is_refused_and_counted_as_one() -> None:
    dispatcher = Dispatcher("test")
    answer = serve(dispatcher, RemotingCommand.request(4242))
    assert answer.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED and "4242 is not supported by test" in answer.remark
    assert dispatcher.counters[-1] == 1 and 4242 not in dispatcher.counters  # a client cannot mint counters


def test_a_stream_of_a_code_with_no_stream_handler_is_refused_as_a_stream() -> None:
    dispatcher = Dispatcher("test")

    async def handler(request: RemotingCommand) -> RemotingCommand:
        return request.response()

    dispatcher.register(RequestCode.GET_MAX_OFFSET, handler)
    request = RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"topic": "t", "queueId": 0})
    request.flag |= Flag.MORE
    assert "not supported as a stream" in serve(dispatcher, request).remark


def test_a_failing_stream_handler_ends_the_stream_with_its_error() -> None:
    dispatcher = Dispatcher("test")

    async def broken(request: RemotingCommand) -> AsyncIterator[RemotingCommand]:
        yield request.response()
        raise KeyError("boom")

    dispatcher.register_stream(RequestCode.PULL_MESSAGE, broken)
    request = RemotingCommand.request(RequestCode.PULL_MESSAGE, PULL)
    request.flag |= Flag.MORE
    codes = [r.code for r in asyncio.run(collect(dispatcher, request))]
    assert codes == [ResponseCode.SUCCESS, ResponseCode.SYSTEM_ERROR]


def test_a_stopped_stream_runs_its_handlers_clean_up_and_logs_nothing(caplog: pytest.LogCaptureFixture) -> None:
    dispatcher = Dispatcher("test")
    cleaned: list[bool] = []

    async def endless(request: RemotingCommand) -> AsyncIterator[RemotingCommand]:
        try:
            while True:
                yield request.response()
                await asyncio.sleep(0)
        finally:
            cleaned.append(True)

    dispatcher.register_stream(RequestCode.PULL_MESSAGE, endless)

    async def stop_after_one() -> None:
        request = RemotingCommand.request(RequestCode.PULL_MESSAGE, PULL)
        request.flag |= Flag.MORE
        accepted = dispatcher.accept(request, 0)
        assert isinstance(accepted, Ticket)
        stream = serve_stream(dispatcher, request, accepted)
        await anext(stream)
        await stream.aclose()  # what the listener does when the client stops it or goes away

    with caplog.at_level(logging.ERROR):
        asyncio.run(stop_after_one())
    assert caplog.records == [] and cleaned == [True]


def test_push_registration_needs_a_client_id_and_a_connection_and_ends_with_it() -> None:
    hub = PushHub()
    closed: list[str] = []
    hub.on_close = closed.append
    dispatcher = Dispatcher("test")
    dispatcher.register(RequestCode.OPEN_PUSH_STREAM, hub.register)
    refused = serve(dispatcher, RemotingCommand.request(RequestCode.OPEN_PUSH_STREAM))
    assert refused.code == ResponseCode.INVALID_PARAMETER and '"clientId" is required' in refused.remark
    in_process = serve(dispatcher, RemotingCommand.request(RequestCode.OPEN_PUSH_STREAM, {"clientId": "c1"}))
    assert in_process.code == ResponseCode.MALFORMED_REQUEST and "needs a connection" in in_process.remark

    channel = FakeChannel()
    request = RemotingCommand.request(RequestCode.OPEN_PUSH_STREAM, {"clientId": "c1"})
    request.channel = channel
    registered = serve(dispatcher, request)
    assert registered.code == ResponseCode.SUCCESS and hub.is_open("c1") and hub.open_count == 1
    assert hub.send("c1", RemotingCommand.request(RequestCode.NOTIFY_CLIENT_TOPIC_ROUTE_CHANGED, {"topics": ["t"]}))
    [pushed] = channel.pushed
    assert pushed.code == RequestCode.NOTIFY_CLIENT_TOPIC_ROUTE_CHANGED and pushed.is_oneway  # a oneway request
    channel.close()
    assert closed == ["c1"] and hub.open_count == 0 and not hub.send("c1", RemotingCommand.request(1))


def test_a_client_that_registers_again_replaces_its_old_connection_without_a_close() -> None:
    hub = PushHub()
    closed: list[str] = []
    hub.on_close = closed.append
    dispatcher = Dispatcher("test")
    dispatcher.register(RequestCode.OPEN_PUSH_STREAM, hub.register)
    old, new = FakeChannel(), FakeChannel()
    for channel in (old, new):
        request = RemotingCommand.request(RequestCode.OPEN_PUSH_STREAM, {"clientId": "c1"})
        request.channel = channel
        serve(dispatcher, request)
    old.close()  # the old connection's end arrives after the new one registered
    assert closed == [] and hub.is_open("c1")
    new.close()
    assert closed == ["c1"] and not hub.is_open("c1")


def test_a_request_out_of_its_shape_is_refused_before_its_handler_runs() -> None:
    dispatcher = Dispatcher("test")
    seen: list[RemotingCommand] = []

    async def handler(request: RemotingCommand) -> RemotingCommand:
        seen.append(request)
        return request.response()

    dispatcher.register(RequestCode.GET_MAX_OFFSET, handler)
    answer = serve(dispatcher, RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"topic": "t", "queueId": -7}))
    assert answer.code == ResponseCode.INVALID_PARAMETER and '"queueId"' in answer.remark and seen == []
    assert answer.ext["error"] == "InvalidParameterError" and dispatcher.counters[RequestCode.GET_MAX_OFFSET] == 1
    good = RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"topic": "t", "queueId": 7})
    assert serve(dispatcher, good).code == ResponseCode.SUCCESS and len(seen) == 1


def test_a_handler_for_a_code_without_a_declared_shape_cannot_be_registered() -> None:
    async def handler(request: RemotingCommand) -> RemotingCommand:
        return request.response()

    with pytest.raises(ValueError, match="request code 4242 has no declared shape"):
        Dispatcher("test").register(4242, handler)


def test_a_body_past_the_budget_is_refused_from_its_header_and_admitted_bytes_come_back() -> None:
    dispatcher = Dispatcher("test", max_inflight_bytes=1)  # each large request is admitted only alone
    code = RequestCode.GET_BROKER_RUNTIME_INFO

    async def handler(request: RemotingCommand) -> RemotingCommand:
        return request.response()

    dispatcher.register(code, handler)
    first = dispatcher.accept(RemotingCommand.request(code), SMALL_REQUEST_BYTES + 1)
    assert isinstance(first, Ticket)
    busy = dispatcher.accept(RemotingCommand.request(code), SMALL_REQUEST_BYTES + 1)
    assert isinstance(busy, RemotingCommand) and busy.code == ResponseCode.SYSTEM_BUSY
    assert "budget of 1 bytes" in busy.remark and busy.ext["limitBytes"] == 1
    assert isinstance(dispatcher.accept(RemotingCommand.request(code), 10), Ticket)  # small ones always pass
    assert asyncio.run(dispatcher.serve(RemotingCommand.request(code), first)).code == ResponseCode.SUCCESS
    assert dispatcher.budget.inflight_bytes == 10 and dispatcher.budget.refused == 1


def test_a_failing_round_does_not_end_the_periodic_loop(caplog: pytest.LogCaptureFixture) -> None:
    rounds: list[int] = []

    def action() -> None:
        rounds.append(len(rounds))
        if len(rounds) == 1:
            raise RuntimeError("first round fails")

    async def run_a_while() -> None:
        task = asyncio.create_task(every_ms_on_loop(1, "test work", action))
        while len(rounds) < 3:
            await asyncio.sleep(0.005)
        task.cancel()

    with caplog.at_level(logging.ERROR):
        asyncio.run(asyncio.wait_for(run_a_while(), 5))
    assert len(rounds) >= 3
    assert any("periodic test work failed" in r.getMessage() for r in caplog.records)
