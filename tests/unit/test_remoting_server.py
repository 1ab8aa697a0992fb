"""The server dispatcher, the push hub and the shared periodic loop, without a network."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import pytest

from rocketspark.protocol.codes import RequestCode, ResponseCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.remoting.admission import SMALL_REQUEST_BYTES
from rocketspark.remoting.framing import PIECE_BYTES, messages
from rocketspark.remoting.server import Dispatcher, PushHub, run_every

CONTEXT: Any = None  # the handlers under test never touch the gRPC context
PULL = {"topic": "t", "queueId": 0, "queueOffset": 0}  # a pull request's required fields


async def _collect(stream: AsyncIterator[bytes]) -> list[RemotingCommand]:
    return [RemotingCommand.decode(raw) async for raw in stream]


def test_a_malformed_stream_request_is_counted_and_answered_like_a_malformed_call() -> None:
    dispatcher = Dispatcher("test")
    streamed = asyncio.run(_collect(dispatcher.stream(b"\x00garbage", CONTEXT)))
    called = RemotingCommand.decode(asyncio.run(dispatcher.invoke(b"\x00garbage", CONTEXT)))
    assert [r.code for r in streamed] == [ResponseCode.MALFORMED_REQUEST] == [called.code]
    assert "malformed request" in streamed[0].remark
    assert dispatcher.counters[-1] == 2


def test_an_unknown_code_is_refused_by_both_call_kinds() -> None:
    dispatcher = Dispatcher("test")
    raw = RemotingCommand.request(4242).encode()
    streamed = asyncio.run(_collect(dispatcher.stream(raw, CONTEXT)))
    called = RemotingCommand.decode(asyncio.run(dispatcher.invoke(raw, CONTEXT)))
    assert streamed[0].code == called.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert dispatcher.counters[-1] == 2 and 4242 not in dispatcher.counters  # a client cannot mint counters


def test_a_client_cancelling_a_stream_is_not_an_error(caplog: pytest.LogCaptureFixture) -> None:
    dispatcher = Dispatcher("test")

    async def endless(request: RemotingCommand) -> AsyncIterator[RemotingCommand]:
        while True:
            yield request.response()
            await asyncio.sleep(0)

    dispatcher.register_stream(RequestCode.PULL_MESSAGE, endless)

    async def cancel_after_one() -> None:
        stream = dispatcher.stream(RemotingCommand.request(RequestCode.PULL_MESSAGE, PULL).encode(), CONTEXT)
        assert isinstance(stream, AsyncGenerator)
        await anext(stream)
        await stream.aclose()  # what grpc.aio does when the client cancels

    with caplog.at_level(logging.ERROR):
        asyncio.run(cancel_after_one())
    assert caplog.records == []


def test_a_failing_stream_handler_ends_the_stream_with_its_error() -> None:
    dispatcher = Dispatcher("test")

    async def broken(request: RemotingCommand) -> AsyncIterator[RemotingCommand]:
        yield request.response()
        raise KeyError("boom")

    dispatcher.register_stream(RequestCode.PULL_MESSAGE, broken)
    raw = RemotingCommand.request(RequestCode.PULL_MESSAGE, PULL).encode()
    codes = [r.code for r in asyncio.run(_collect(dispatcher.stream(raw, CONTEXT)))]
    assert codes == [ResponseCode.SUCCESS, ResponseCode.SYSTEM_ERROR]


def test_a_push_stream_needs_a_client_id_and_reports_its_close() -> None:
    hub = PushHub()
    closed: list[str] = []
    hub.on_close = closed.append
    dispatcher = Dispatcher("test")
    dispatcher.register_stream(RequestCode.OPEN_PUSH_STREAM, hub.stream)

    refused = asyncio.run(
        _collect(dispatcher.stream(RemotingCommand.request(RequestCode.OPEN_PUSH_STREAM).encode(), CONTEXT))
    )
    assert refused[0].code == ResponseCode.INVALID_PARAMETER and '"clientId" is required' in refused[0].remark

    async def open_push_close() -> tuple[RemotingCommand, RemotingCommand]:
        raw = RemotingCommand.request(RequestCode.OPEN_PUSH_STREAM, {"clientId": "c1"}).encode()
        stream = dispatcher.stream(raw, CONTEXT)
        assert isinstance(stream, AsyncGenerator)
        registered = RemotingCommand.decode(await anext(stream))
        assert hub.is_open("c1") and hub.open_count == 1  # open by the time the client hears so
        second = asyncio.ensure_future(anext(stream))
        assert hub.send("c1", RemotingCommand.request(RequestCode.NOTIFY_CLIENT_TOPIC_ROUTE_CHANGED, {"topics": ["t"]}))
        pushed = RemotingCommand.decode(await second)
        await stream.aclose()
        assert closed == ["c1"]  # at once, not when the generators are garbage-collected
        return registered, pushed

    registered, pushed = asyncio.run(open_push_close())
    assert registered.is_response and registered.code == ResponseCode.SUCCESS
    assert pushed.code == RequestCode.NOTIFY_CLIENT_TOPIC_ROUTE_CHANGED and pushed.is_oneway
    assert closed == ["c1"] and hub.open_count == 0 and not hub.send("c1", RemotingCommand.request(1))


def test_a_push_stream_reopened_under_the_same_id_replaces_the_old_one_without_a_close() -> None:
    hub = PushHub()
    closed: list[str] = []
    hub.on_close = closed.append
    dispatcher = Dispatcher("test")
    dispatcher.register_stream(RequestCode.OPEN_PUSH_STREAM, hub.stream)
    raw = RemotingCommand.request(RequestCode.OPEN_PUSH_STREAM, {"clientId": "c1"}).encode()

    async def reconnect() -> None:
        old, new = dispatcher.stream(raw, CONTEXT), dispatcher.stream(raw, CONTEXT)
        assert isinstance(old, AsyncGenerator) and isinstance(new, AsyncGenerator)
        await anext(old)
        await anext(new)
        await old.aclose()  # the old stream's end arrives after the new one opened
        assert closed == [] and hub.is_open("c1")
        await new.aclose()
        assert closed == ["c1"] and not hub.is_open("c1")

    asyncio.run(reconnect())


def test_a_request_out_of_its_shape_is_refused_before_its_handler_runs() -> None:
    dispatcher = Dispatcher("test")
    seen: list[RemotingCommand] = []

    async def handler(request: RemotingCommand) -> RemotingCommand:
        seen.append(request)
        return request.response()

    dispatcher.register(RequestCode.GET_MAX_OFFSET, handler)
    bad = RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"topic": "t", "queueId": -7})
    answer = RemotingCommand.decode(asyncio.run(dispatcher.invoke(bad.encode(), CONTEXT)))
    assert answer.code == ResponseCode.INVALID_PARAMETER and '"queueId"' in answer.remark and seen == []
    assert answer.ext["error"] == "InvalidParameterError" and dispatcher.counters[RequestCode.GET_MAX_OFFSET] == 1
    good = RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"topic": "t", "queueId": 7})
    assert RemotingCommand.decode(asyncio.run(dispatcher.invoke(good.encode(), CONTEXT))).code == ResponseCode.SUCCESS
    assert len(seen) == 1


def test_a_handler_for_a_code_without_a_declared_shape_cannot_be_registered() -> None:
    async def handler(request: RemotingCommand) -> RemotingCommand:
        return request.response()

    with pytest.raises(ValueError, match="request code 4242 has no declared shape"):
        Dispatcher("test").register(4242, handler)


def test_the_channel_refuses_past_its_budget_and_gives_every_byte_back_when_the_stream_ends() -> None:
    dispatcher = Dispatcher("test", max_inflight_bytes=1)  # each request is admitted only alone
    code = RequestCode.GET_BROKER_RUNTIME_INFO
    padding = {"padding": "p" * SMALL_REQUEST_BYTES}  # small requests are never refused; undeclared fields ignored

    async def scenario() -> None:
        gate = asyncio.Event()

        async def slow(request: RemotingCommand) -> RemotingCommand:
            await gate.wait()
            return request.response()

        dispatcher.register(code, slow)
        inbox: asyncio.Queue[bytes | None] = asyncio.Queue()

        async def requests() -> AsyncIterator[bytes]:
            while (message := await inbox.get()) is not None:
                yield message

        responses = dispatcher.channel(requests(), CONTEXT)
        first, second = RemotingCommand.request(code, padding), RemotingCommand.request(code, padding)
        large = RemotingCommand.request(code, body=b"x" * (3 * PIECE_BYTES))
        for message in [first.encode(), second.encode(), *messages(large.encode())]:
            inbox.put_nowait(message)
        answers = [RemotingCommand.decode(await anext(responses)) for _ in range(2)]
        assert [(a.opaque, a.code) for a in answers] == [(r.opaque, ResponseCode.SYSTEM_BUSY) for r in (second, large)]
        assert "budget of 1 bytes" in answers[0].remark and dispatcher.counters[code] == 3
        assert dispatcher.budget.inflight_bytes == len(first.encode()) and dispatcher.budget.refused == 2
        assert isinstance(responses, AsyncGenerator)
        await responses.aclose()  # the client went away with the first request still running
        await asyncio.sleep(0)
        assert dispatcher.budget.inflight_bytes == 0

    asyncio.run(scenario())


def test_a_failing_round_does_not_end_the_periodic_loop(caplog: pytest.LogCaptureFixture) -> None:
    rounds: list[int] = []

    def action() -> None:
        rounds.append(len(rounds))
        if len(rounds) == 1:
            raise RuntimeError("first round fails")

    async def run_a_while() -> None:
        task = asyncio.create_task(run_every(1, "test work", action))
        while len(rounds) < 3:
            await asyncio.sleep(0.005)
        task.cancel()

    with caplog.at_level(logging.ERROR):
        asyncio.run(asyncio.wait_for(run_a_while(), 5))
    assert len(rounds) >= 3
    assert any("periodic test work failed" in r.getMessage() for r in caplog.records)
