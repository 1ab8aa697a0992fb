"""The remoting client against peers that are not there: errors, and no threads left behind."""

from __future__ import annotations

import concurrent.futures
import gc
import os
import socket
import threading
import time
import weakref

import pytest

from rocketspark.errors import ConnectError, RequestTimeoutError
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.remoting.client import RemotingClient
from rocketspark.remoting.deadlines import DEADLINES


def _dead_address() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{sock.getsockname()[1]}"  # closed again: nothing listens there


def _settled_thread_count(limit: int, timeout_s: float = 5.0) -> int:
    """The live thread count once it falls to ``limit`` (or whatever it is at the timeout)."""
    deadline = time.monotonic() + timeout_s
    while threading.active_count() > limit and time.monotonic() < deadline:
        time.sleep(0.05)
    return threading.active_count()


def test_calls_to_a_dead_peer_leave_no_threads_behind() -> None:
    address = _dead_address()
    client = RemotingClient()
    try:
        with pytest.raises(ConnectError, match="connection refused"):
            client.invoke(address, RemotingCommand.request(RequestCode.GET_COUNTERS), 1000)
        baseline = _settled_thread_count(0, timeout_s=0.5)
        for _ in range(10):
            with pytest.raises(ConnectError):
                client.invoke(address, RemotingCommand.request(RequestCode.GET_COUNTERS), 1000)
        assert _settled_thread_count(baseline + 1) <= baseline + 1  # no reader thread per failed connection
        assert client.connected_peers == []
    finally:
        client.close()


def test_a_deadline_earlier_than_the_waiting_one_still_fires_on_time() -> None:
    later: concurrent.futures.Future[RemotingCommand] = concurrent.futures.Future()
    sooner: concurrent.futures.Future[RemotingCommand] = concurrent.futures.Future()
    DEADLINES.add(time.monotonic() + 60, later, lambda: RequestTimeoutError("later"))
    time.sleep(0.05)  # the deadline thread now sleeps until the 60 s deadline
    DEADLINES.add(time.monotonic() + 0.05, sooner, lambda: RequestTimeoutError("sooner"))
    with pytest.raises(RequestTimeoutError, match="sooner"):
        sooner.result(timeout=5)
    assert not later.done()
    later.set_result(RemotingCommand.request(RequestCode.GET_COUNTERS))


def test_the_deadline_heap_does_not_keep_answered_requests_alive() -> None:
    future: concurrent.futures.Future[RemotingCommand] = concurrent.futures.Future()
    DEADLINES.add(time.monotonic() + 60, future, lambda: RequestTimeoutError("never"))
    time.sleep(0.05)  # the deadline thread now sleeps until that deadline
    future.set_result(RemotingCommand.request(RequestCode.GET_COUNTERS, body=b"x" * 1000))
    ref = weakref.ref(future)
    del future
    gc.collect()
    assert ref() is None  # its response body is freed now, not in 60 s


def test_a_forked_child_gets_fresh_connections_and_deadlines() -> None:
    with socket.socket() as silent:  # accepts, never answers: the parent keeps a connection to it
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        address = f"127.0.0.1:{silent.getsockname()[1]}"
        client = RemotingClient()
        try:
            with pytest.raises(RequestTimeoutError):
                client.invoke(address, RemotingCommand.request(RequestCode.GET_COUNTERS), 200)
            assert client.connected_peers == [address]  # the parent's connection, which the child must not use
            read_end, write_end = os.pipe()
            pid = os.fork()
            if pid == 0:  # the child: report, never return into pytest
                status = b"?"
                try:
                    fresh = not client.connected_peers
                    try:
                        client.invoke(address, RemotingCommand.request(RequestCode.GET_COUNTERS), 200)
                    except RequestTimeoutError:  # its own connection and its own deadline thread
                        status = b"ok" if fresh else b"kept the parent's connections"
                finally:
                    os.write(write_end, status)
                    os._exit(0)
            os.close(write_end)
            with os.fdopen(read_end, "rb") as reader:
                report = reader.read()
            os.waitpid(pid, 0)
            assert report == b"ok"
        finally:
            client.close()
