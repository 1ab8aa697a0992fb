"""The TCP listener and the client's connection, on real sockets on 127.0.0.1 (no processes):
requests multiplexed by opaque, refusals from the header, stalled peers, streams and pushes."""

from __future__ import annotations

import asyncio
import gc
import socket
import struct
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import msgpack
import pytest

from rocketspark import loops
from rocketspark.errors import ConnectError, RequestTimeoutError
from rocketspark.protocol.codes import Flag, RequestCode, ResponseCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.remoting import frame
from rocketspark.remoting.admission import SMALL_REQUEST_BYTES
from rocketspark.remoting.client import RemotingClient, check
from rocketspark.remoting.listener import create_server
from rocketspark.remoting.server import Dispatcher, PushHub
from tests.helpers import eventually

INFO = RequestCode.GET_BROKER_RUNTIME_INFO
SEND = RequestCode.SEND_MESSAGE  # a request with a body
TOPIC = {"topic": "t"}
PULL = {"topic": "t", "queueId": 0, "queueOffset": 0}


class Server:
    """A dispatcher behind a real listener on its own event loop thread."""

    def __init__(self, dispatcher: Dispatcher, stall_s: float = 5.0) -> None:
        self.dispatcher = dispatcher
        self.loop = loops.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

        async def start() -> Any:
            listener, port = create_server(dispatcher, "127.0.0.1", 0, stall_s=stall_s)
            await listener.start()
            return listener, port

        self.listener, port = asyncio.run_coroutine_threadsafe(start(), self.loop).result(10)
        self.address = f"127.0.0.1:{port}"

    def call_soon(self, fn: Any, *args: Any) -> None:
        self.loop.call_soon_threadsafe(fn, *args)

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.listener.stop(0), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@pytest.fixture
def dispatcher() -> Dispatcher:
    return Dispatcher("test", max_inflight_bytes=2 * 1024 * 1024)


@pytest.fixture
def server(dispatcher: Dispatcher) -> Iterator[Server]:
    running = Server(dispatcher, stall_s=0.5)
    yield running
    running.close()


@pytest.fixture
def client() -> Iterator[RemotingClient]:
    made = RemotingClient()
    yield made
    made.close()


def raw_frame(code: int, ext: dict[str, Any], body_bytes: int, opaque: int = 1) -> bytes:
    """A frame's prefix and header announcing ``body_bytes`` of body (not included)."""
    header = msgpack.packb([code, opaque, 0, "", ext])
    return struct.pack(">iI", 4 + len(header) + body_bytes, (frame.MSGPACK << 24) | len(header)) + header


def read_response(sock: socket.socket) -> RemotingCommand:
    data = b""
    while len(data) < 8 or len(data) < 4 + frame.PREFIX.unpack_from(data, 0)[0]:
        chunk = sock.recv(65536)
        assert chunk, "the server closed the connection"
        data += chunk
    _, word = frame.PREFIX.unpack_from(data, 0)
    return frame.decode_header(frame.serialization(word), data[8 : 8 + frame.header_length(word)])


def test_requests_on_one_connection_are_answered_out_of_order_by_opaque(
    dispatcher: Dispatcher, server: Server, client: RemotingClient
) -> None:
    gate = threading.Event()

    async def handler(request: RemotingCommand) -> RemotingCommand:
        if request.ext.get("slow"):
            await asyncio.get_running_loop().run_in_executor(None, gate.wait, 10)
        n = request.ext.get("n", 0)
        return request.response(ext={"echo": n}, body=b"x" * n)

    dispatcher.register(INFO, handler)
    slow = client.invoke_async(server.address, RemotingCommand.request(INFO, {"slow": True, "n": 0}))
    fast = [client.invoke(server.address, RemotingCommand.request(INFO, {"n": i})) for i in range(1, 50)]
    assert [(r.ext["echo"], len(r.body)) for r in fast] == [(i, i) for i in range(1, 50)]
    assert not slow.done()  # answered out of order: the fast ones did not wait behind it
    gate.set()
    assert slow.result(5).ext["echo"] == 0 and client.connected_peers == [server.address]  # one connection


def test_a_large_body_past_the_budget_is_refused_from_its_header_and_the_connection_goes_on(
    dispatcher: Dispatcher, server: Server
) -> None:
    started, release = threading.Event(), threading.Event()

    async def handler(request: RemotingCommand) -> RemotingCommand:
        started.set()
        await asyncio.get_running_loop().run_in_executor(None, release.wait, 10)
        return request.response()

    dispatcher.register(SEND, handler)
    dispatcher.register(INFO, handler)
    big = 1024 * 1024 + SMALL_REQUEST_BYTES
    with socket.create_connection(server.listener.sock.getsockname()) as sock:
        sock.sendall(raw_frame(SEND, TOPIC, big, opaque=1) + b"a" * big)  # admitted: fills the budget
        assert started.wait(5)
        started.clear()
        sock.sendall(raw_frame(SEND, TOPIC, 2 * big, opaque=2))  # refused from its header alone
        busy = read_response(sock)
        assert (busy.opaque, busy.code) == (2, ResponseCode.SYSTEM_BUSY)
        sock.sendall(b"b" * 2 * big)  # its body, sent anyway, is dropped as it comes
        release.set()
        assert read_response(sock).opaque == 1
        release.set()
        sock.sendall(raw_frame(INFO, {}, 0, opaque=3))  # the connection still serves
        assert read_response(sock).opaque == 3
    assert dispatcher.budget.inflight_bytes == 0 and dispatcher.budget.refused == 1


def test_a_peer_that_stops_in_the_middle_of_a_body_is_cut_off_and_holds_nothing(
    dispatcher: Dispatcher, server: Server, client: RemotingClient
) -> None:
    async def handler(request: RemotingCommand) -> RemotingCommand:
        return request.response()

    dispatcher.register(SEND, handler)
    announced = 200 * 1024 * 1024
    with socket.create_connection(server.listener.sock.getsockname()) as sock:
        sock.sendall(raw_frame(SEND, TOPIC, announced) + b"x" * (1024 * 1024))  # then nothing
        eventually(lambda: dispatcher.budget.inflight_bytes >= announced, 5)  # its header counts too
        sock.settimeout(10)
        assert sock.recv(1) == b""  # closed by the server (stall_s = 0.5 here)
    assert dispatcher.budget.inflight_bytes == 0
    answer = client.invoke(server.address, RemotingCommand.request(SEND, TOPIC, b"y" * (1024 * 1024)))
    assert answer.code == ResponseCode.SUCCESS  # a large send of someone else goes through


def test_an_unparseable_frame_ends_only_its_own_connection(
    dispatcher: Dispatcher, server: Server, client: RemotingClient
) -> None:
    async def handler(request: RemotingCommand) -> RemotingCommand:
        return request.response()

    dispatcher.register(INFO, handler)
    with socket.create_connection(server.listener.sock.getsockname()) as sock:
        header = b"\xc1 not msgpack"
        sock.sendall(struct.pack(">iI", 4 + len(header), (frame.MSGPACK << 24) | len(header)) + header)
        sock.settimeout(10)
        assert sock.recv(1) == b""
    assert check(client.invoke(server.address, RemotingCommand.request(INFO))).code == ResponseCode.SUCCESS


def test_a_stream_sends_each_response_and_stops_when_the_client_stops_it(
    dispatcher: Dispatcher, server: Server, client: RemotingClient
) -> None:
    ended = threading.Event()

    async def endless(request: RemotingCommand) -> AsyncIterator[RemotingCommand]:
        try:
            n = 0
            while True:
                yield request.response(ext={"n": n})
                n += 1
                await asyncio.sleep(0.01)
        finally:
            ended.set()

    async def three(request: RemotingCommand) -> AsyncIterator[RemotingCommand]:
        for n in range(3):
            yield request.response(ext={"n": n})

    dispatcher.register_stream(RequestCode.PULL_MESSAGE, endless)
    dispatcher.register_stream(RequestCode.QUERY_MESSAGE, three)
    stream = client.invoke_stream(server.address, RemotingCommand.request(RequestCode.PULL_MESSAGE, PULL), 10_000)
    assert [next(stream).ext["n"] for _ in range(5)] == [0, 1, 2, 3, 4]
    stream.cancel()
    assert ended.wait(5)
    finite = client.invoke_stream(
        server.address, RemotingCommand.request(RequestCode.QUERY_MESSAGE, {"topic": "t", "key": "k"}), 10_000
    )
    answers = list(finite)  # each sent as it was made; an empty end frame ends the iteration
    assert [a.ext["n"] for a in answers] == [0, 1, 2]
    assert all(a.flag & Flag.MORE for a in answers)


def test_pushes_arrive_on_the_clients_connection_as_oneway_requests(
    dispatcher: Dispatcher, server: Server, client: RemotingClient
) -> None:
    hub = PushHub()
    dispatcher.register(RequestCode.OPEN_PUSH_STREAM, hub.register)
    stream = client.open_push_stream(server.address, "c1")
    assert next(stream).code == ResponseCode.SUCCESS and hub.is_open("c1")
    notify = RemotingCommand.request(RequestCode.NOTIFY_CLIENT_TOPIC_ROUTE_CHANGED, {"topics": ["t"]})
    server.call_soon(hub.send, "c1", notify)
    pushed = next(stream)
    assert pushed.code == RequestCode.NOTIFY_CLIENT_TOPIC_ROUTE_CHANGED and pushed.ext == {"topics": ["t"]}
    client.close()  # the connection ends: so does the registration
    eventually(lambda: not hub.is_open("c1"), 5)


def test_a_dead_or_silent_peer_gives_clear_errors_and_no_hang() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{probe.getsockname()[1]}"
    client = RemotingClient()
    with socket.socket() as silent:  # accepts, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        try:
            with pytest.raises(ConnectError, match="connection refused"):
                client.invoke(dead, RemotingCommand.request(INFO))
            started = time.monotonic()
            with pytest.raises(RequestTimeoutError, match=r"did not answer request code 28 within 0\.2 s"):
                client.invoke(f"127.0.0.1:{silent.getsockname()[1]}", RemotingCommand.request(INFO), 200)
            assert time.monotonic() - started < 30  # a generous bound: no hang
        finally:
            client.close()


@pytest.mark.parametrize("loop_factory", [loops.new_event_loop, asyncio.new_event_loop], ids=["uvloop", "asyncio"])
def test_a_request_served_eagerly_runs_at_once_and_one_that_waits_finishes_in_a_task(loop_factory: Any) -> None:
    from rocketspark.remoting.eager import eagerly

    seen: list[str] = []

    async def quick() -> None:
        seen.append("quick")

    async def waits() -> None:
        await asyncio.sleep(0)  # a bare yield
        await asyncio.sleep(0.01)  # a future
        fut = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().call_later(0.01, fut.set_exception, ValueError("from the future"))
        try:
            await fut
        except ValueError as exc:
            seen.append(str(exc))
        await asyncio.shield(asyncio.sleep(0.01))
        seen.append("waited")

    async def cancelled() -> None:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    async def main() -> None:
        loop = asyncio.get_running_loop()
        assert eagerly(loop, quick()) is None and seen == ["quick"]  # done on the spot, no task
        task = eagerly(loop, waits())
        assert task is not None
        await task
        stuck = eagerly(loop, cancelled())
        assert stuck is not None
        await asyncio.sleep(0.01)
        stuck.cancel()
        with pytest.raises(asyncio.CancelledError):
            await stuck

    loop = loop_factory()
    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
    assert seen == ["quick", "from the future", "waited", "cancelled"]


def test_no_request_handler_needs_a_task_of_its_own() -> None:
    """Requests run eagerly, outside any task until they first wait (``eagerly``); asyncio's
    timeout and current_task need a task. The servers' code keeps to timers on the loop (the
    HA port's connections, which run in tasks of their own, are the one exception)."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    offenders = [
        str(path.relative_to(root))
        for package in ("broker", "nameserver")
        for path in (root / package).rglob("*.py")
        if path.name != "transfer.py" and any(s in path.read_text() for s in ("asyncio.timeout(", "current_task("))
    ]
    assert offenders == []


def test_a_request_waiting_when_its_loop_closes_is_closed_with_it() -> None:
    from rocketspark.remoting.eager import eagerly

    closed: list[bool] = []

    async def waits_forever() -> None:
        try:
            await asyncio.get_running_loop().create_future()
        finally:
            closed.append(True)

    async def start() -> asyncio.Task[None] | None:
        return eagerly(asyncio.get_running_loop(), waits_forever())

    loop = loops.new_event_loop()
    task = loop.run_until_complete(start())
    assert task is not None and not task.done()
    loop.close()
    del task
    gc.collect()  # the pending task is finalized: its request is closed with it, nothing raised
    assert closed == [True]
