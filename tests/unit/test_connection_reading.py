"""Who reads a client connection's answers (rocketspark.remoting.connection): a synchronous
caller reads its own when nobody else is reading, hands the reading on to a caller still
waiting when it is done, and the background reader takes over when no caller is about.

The peer is a real TCP server written here with the frame module: it answers each request
with its own body, after ``delayS`` seconds if the request asks, never if it asks ``silent``,
and with ``pushFirst`` writes a oneway request of its own before the answer.
"""

from __future__ import annotations

import concurrent.futures
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from rocketspark.errors import NotMasterError, RequestTimeoutError, RocketSparkError
from rocketspark.protocol.codes import Flag, RequestCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.remoting import frame
from rocketspark.remoting.client import RemotingClient
from rocketspark.remoting.connection import CALLER_GRACE_S, Connection


class _Peer:
    """A server of one connection at a time, answering as the module's docstring says."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.write_lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(sock,), daemon=True).start()

    def _serve(self, sock: socket.socket) -> None:
        buffer = bytearray()
        while True:
            data = sock.recv(65536)
            if not data:
                return
            buffer += data
            del buffer[: frame.take_commands(buffer, lambda request: self._answer(sock, request))]

    def _answer(self, sock: socket.socket, request: RemotingCommand) -> None:
        if request.ext.get("silent"):
            return
        if request.ext.get("pushFirst"):
            push = RemotingCommand.request(RequestCode.GET_COUNTERS, {"pushed": True})
            push.flag |= Flag.ONEWAY
            self._write(sock, push)
        response = request.response()
        response.body = request.body
        delay = float(request.ext.get("delayS", 0))
        if delay:
            threading.Timer(delay, self._write, (sock, response)).start()
        else:
            self._write(sock, response)

    def _write(self, sock: socket.socket, command: RemotingCommand) -> None:
        with self.write_lock:
            sock.sendall(b"".join(frame.encode(command)))


@pytest.fixture
def peer() -> Iterator[_Peer]:
    server = _Peer()
    yield server
    server.listener.close()


def _connect(peer: _Peer, on_request: object = None, caller_grace_s: float = CALLER_GRACE_S) -> Connection:
    def failure(cause: BaseException, answered: bool) -> RocketSparkError:
        return RocketSparkError(f"connection failed: {cause}")

    return Connection(
        f"127.0.0.1:{peer.port}",
        "127.0.0.1",
        peer.port,
        context=None,
        timeout_s=5,
        failure=failure,
        on_request=on_request,  # type: ignore[arg-type]
        caller_grace_s=caller_grace_s,
    )


def _call(conn: Connection, body: bytes, timeout_s: float = 10, **ext: object) -> RemotingCommand:
    request = RemotingCommand.request(RequestCode.GET_COUNTERS, dict(ext), body)
    return conn.call(request, timeout_s, lambda: RequestTimeoutError("no answer in time"))


def test_a_caller_in_a_loop_reads_its_own_answers(peer: _Peer) -> None:
    readers: list[int] = []
    # a long grace: the background reader stays aside
    conn = _connect(peer, lambda command, _: readers.append(threading.get_ident()), caller_grace_s=60.0)
    try:
        _call(conn, b"first")  # perhaps read by the background reader, which then stands aside
        readers.clear()
        for k in range(5):
            assert _call(conn, b"%d" % k, pushFirst=True).body == b"%d" % k
        assert readers == [threading.get_ident()] * 5  # each push came in with its answer, read here
    finally:
        conn.close()


def test_many_threads_each_get_their_own_answers(peer: _Peer) -> None:
    conn = _connect(peer)

    def calls(k: int) -> None:
        for n in range(200):
            body = b"%d-%d" % (k, n)
            assert _call(conn, body, delayS=0.001 if n % 50 == 0 else 0).body == body

    try:
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            for done in [pool.submit(calls, k) for k in range(8)]:
                done.result(timeout=120)
    finally:
        conn.close()


def test_a_reader_that_times_out_hands_the_reading_on(peer: _Peer) -> None:
    conn = _connect(peer, caller_grace_s=60.0)  # nobody but callers reads
    try:
        _call(conn, b"warm")  # the background reader now stands aside
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            first = threading.Event()

            def unanswered() -> None:
                first.set()
                _call(conn, b"never", timeout_s=0.5, silent=True)

            timing_out = pool.submit(unanswered)
            first.wait(5)
            deadline = time.monotonic() + 5
            while not conn._read_role.locked() and time.monotonic() < deadline:
                time.sleep(0.01)  # it has sent, and reads for its answer
            late = _call(conn, b"late", delayS=1.5)  # answered after the other caller gave up
            assert late.body == b"late"
            with pytest.raises(RequestTimeoutError):
                timing_out.result(timeout=10)
    finally:
        conn.close()


def test_async_answers_and_pushes_arrive_with_no_caller_about(peer: _Peer) -> None:
    pushes: list[RemotingCommand] = []
    pushed = threading.Event()

    def on_request(command: RemotingCommand, _: Connection) -> None:
        pushes.append(command)
        pushed.set()

    conn = _connect(peer, on_request)
    try:
        _call(conn, b"sync")
        request = RemotingCommand.request(RequestCode.GET_COUNTERS, {"pushFirst": True, "delayS": 0.2}, b"async")
        future = conn.submit(request, 10, lambda: RequestTimeoutError("no answer in time"))
        assert future.result(timeout=10).body == b"async"
        assert pushed.wait(10) and pushes[0].ext.get("pushed") is True
    finally:
        conn.close()


def test_a_closed_connection_fails_its_reading_caller(peer: _Peer) -> None:
    conn = _connect(peer)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(_call, conn, b"never", 30, silent=True)
        with pytest.raises(concurrent.futures.TimeoutError):
            waiting.result(timeout=0.3)  # it waits (reading, or waiting for its answer)
        conn.close()
        with pytest.raises(RocketSparkError, match="closed"):
            waiting.result(timeout=10)


def test_a_reading_caller_hears_of_a_failure_found_by_another_thread(peer: _Peer) -> None:
    conn = _connect(peer, caller_grace_s=60.0)  # the caller, not the background, reads
    _call(conn, b"warm")
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(_call, conn, b"never", 60, silent=True)
        deadline = time.monotonic() + 5
        while not conn._read_role.locked() and time.monotonic() < deadline:
            time.sleep(0.01)  # it waits for its answer, reading or about to
        conn._fail(ConnectionResetError("a send found the connection reset"))  # as a failed write does
        with pytest.raises(RocketSparkError, match="reset"):
            waiting.result(timeout=10)  # not its 60 s deadline: the failure woke its poll


def test_a_watched_call_gives_up_when_its_watch_says_so_and_the_connection_goes_on(peer: _Peer) -> None:
    """A send waiting on a replica group's master stops as soon as the route names another:
    the watch runs every tick of the wait, its error ends the call (long before the
    deadline), and the late answer, when it comes, is dropped."""
    conn = _connect(peer)
    ticks: list[float] = []

    def check() -> None:
        ticks.append(time.monotonic())
        if len(ticks) == 3:
            raise NotMasterError("the group has a new master")

    request = RemotingCommand.request(RequestCode.GET_COUNTERS, {"delayS": 1.5}, b"late")
    started = time.monotonic()
    with pytest.raises(NotMasterError):
        conn.call(request, 60, lambda: RequestTimeoutError("no answer in time"), (0.05, check))
    assert len(ticks) == 3 and time.monotonic() - started < 30  # not the 60 s deadline
    assert _call(conn, b"after").body == b"after"  # the connection serves the next call
    time.sleep(2)  # the abandoned request's answer arrives and is dropped
    assert _call(conn, b"again").body == b"again"
    conn.close()


def test_a_watched_call_that_is_answered_returns_its_answer(peer: _Peer) -> None:
    conn = _connect(peer)
    ticks: list[int] = []
    request = RemotingCommand.request(RequestCode.GET_COUNTERS, {"delayS": 0.3}, b"answer")
    answer = conn.call(request, 60, lambda: RequestTimeoutError("no answer in time"), (0.02, lambda: ticks.append(1)))
    assert answer.body == b"answer" and ticks  # it watched while it waited
    with pytest.raises(RequestTimeoutError):  # the deadline still ends a call its watch lets go on
        silent = RemotingCommand.request(RequestCode.GET_COUNTERS, {"silent": True}, b"")
        conn.call(silent, 0.3, lambda: RequestTimeoutError("no answer in time"), (0.05, lambda: None))
    conn.close()


class _OwnServer:
    """A LocalPeer (the server a client runs in) whose answers come when the test says."""

    def __init__(self) -> None:
        self.futures: list[concurrent.futures.Future[RemotingCommand]] = []

    def serves(self, address: str) -> bool:
        return address == "own:1"

    def submit(self, request: RemotingCommand, timeout_s: float) -> concurrent.futures.Future[RemotingCommand]:
        self.futures.append(concurrent.futures.Future())
        return self.futures[-1]


def test_a_watched_call_to_the_clients_own_server_is_watched_too() -> None:
    """A broker's v2 endpoint sends to its own broker in process: a wait there for a master
    deposed meanwhile ends as soon as the route says so, as over the network."""
    own = _OwnServer()
    client = RemotingClient(local=own)
    ticks: list[int] = []

    def check() -> None:
        ticks.append(1)
        if len(ticks) == 2:
            raise NotMasterError("the group has a new master")

    request = RemotingCommand.request(RequestCode.GET_COUNTERS, {}, b"")
    with pytest.raises(NotMasterError):
        client.invoke("own:1", request, 60_000, watch=(0.02, check))
    answer = RemotingCommand.request(RequestCode.GET_COUNTERS, {}, b"done").response(body=b"done")
    threading.Timer(0.1, lambda: own.futures[-1].set_result(answer)).start()
    got = client.invoke(
        "own:1", RemotingCommand.request(RequestCode.GET_COUNTERS, {}, b""), 60_000, watch=(0.02, ticks.clear)
    )
    assert got.body == b"done"
    client.close()
