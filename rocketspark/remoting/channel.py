"""One long-lived bidirectional gRPC stream per peer, carrying many requests at once.

This is RocketMQ's remoting model (one connection, requests matched to responses by their
``opaque``) on top of gRPC: a request is a stream message instead of a new HTTP/2 call, which
halves the server's per-request cost. Each request still has its own deadline, enforced
here: a peer that never answers produces a timeout, never a hang. If the stream breaks, every
request in flight fails with the translated error and the next request opens a new stream.
A large request goes out in pieces (``rocketspark.remoting.framing``), so that a busy server
can refuse it without holding all of it.
"""

from __future__ import annotations

import concurrent.futures
import heapq
import itertools
import os
import queue
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import grpc

from rocketspark.errors import RocketSparkError
from rocketspark.protocol.command import MalformedCommand, RemotingCommand
from rocketspark.remoting import framing

Translate = Callable[[grpc.RpcError], RocketSparkError]
Expire = Callable[[], RocketSparkError]
_CLOSE = object()
_Entry = tuple[float, int, "weakref.ref[concurrent.futures.Future[RemotingCommand]]", Expire]


class _Deadlines:
    """One thread for the whole process that fails requests whose deadline has passed.

    The heap holds weak references: an answered request's future (and its response body) is
    freed as soon as its caller drops it, not when its deadline reaches the top of the heap.
    A request still waiting is kept alive by its stream's pending table.
    """

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Start empty; also run in a forked child, which has no deadline thread, none of the
        parent's requests, and perhaps a lock held by a thread that does not exist there."""
        self._heap: list[_Entry] = []
        self._cond = threading.Condition()
        self._seq = itertools.count()
        self._thread: threading.Thread | None = None

    def add(self, deadline: float, future: concurrent.futures.Future[RemotingCommand], expire: Expire) -> None:
        entry = (deadline, next(self._seq), weakref.ref(future), expire)
        with self._cond:
            heapq.heappush(self._heap, entry)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="remoting-deadlines", daemon=True)
                self._thread.start()
            elif self._heap[0] is entry:
                self._cond.notify()  # it sleeps until a later deadline; otherwise no wake-up needed

    def _run(self) -> None:
        while True:
            with self._cond:
                while self._heap and _settled(self._heap[0][2]):
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._cond.wait()
                    continue
                wait = self._heap[0][0] - time.monotonic()
                if wait > 0:
                    self._cond.wait(wait)
                    continue
                _, _, ref, expire = heapq.heappop(self._heap)
            future = ref()
            if future is not None and not future.done():
                try:
                    future.set_exception(expire())
                except concurrent.futures.InvalidStateError:
                    pass  # answered at the very last moment


def _settled(ref: weakref.ref[concurrent.futures.Future[RemotingCommand]]) -> bool:
    future = ref()
    return future is None or future.done()


DEADLINES = _Deadlines()
os.register_at_fork(after_in_child=DEADLINES.reset)


class MuxStream:
    """Requests out, responses in, matched by opaque. Thread-safe."""

    def __init__(self, open_call: Callable[[Iterator[bytes]], Any], translate: Translate) -> None:
        self._outbox: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._pending: dict[int, concurrent.futures.Future[RemotingCommand]] = {}
        self._lock = threading.Lock()
        self._translate = translate
        self._broken: RocketSparkError | None = None
        self._opaques = itertools.count(1)
        self._call = open_call(self._requests())
        self._reader = threading.Thread(target=self._read, name="remoting-reader", daemon=True)
        self._reader.start()

    @property
    def alive(self) -> bool:
        return self._broken is None

    def _requests(self) -> Iterator[bytes]:
        while True:
            item = self._outbox.get()
            if item is _CLOSE:
                return
            assert isinstance(item, bytes)
            yield from framing.messages(item)  # a large request in pieces, one after the other

    def submit(
        self, request: RemotingCommand, timeout_s: float, expire: Expire
    ) -> concurrent.futures.Future[RemotingCommand]:
        """Send a request; the future fails with ``expire()`` if no answer comes in time."""
        future: concurrent.futures.Future[RemotingCommand] = concurrent.futures.Future()
        with self._lock:
            if self._broken is not None:
                future.set_exception(self._broken)
                return future
            request.opaque = next(self._opaques)  # unique on this stream, whatever the caller set
            self._pending[request.opaque] = future
        opaque = request.opaque
        future.add_done_callback(lambda _: self.forget(opaque))
        DEADLINES.add(time.monotonic() + timeout_s, future, expire)
        self._outbox.put(request.encode())
        return future

    def forget(self, opaque: int) -> None:
        """Drop a request whose caller stopped waiting (its deadline passed)."""
        with self._lock:
            self._pending.pop(opaque, None)

    def _read(self) -> None:
        try:
            for raw in self._call:
                try:
                    response = RemotingCommand.decode(raw)
                except MalformedCommand:
                    continue
                with self._lock:
                    future = self._pending.pop(response.opaque, None)
                if future is not None and not future.done():
                    try:
                        future.set_result(response)
                    except concurrent.futures.InvalidStateError:
                        pass  # its deadline fired first
            error: RocketSparkError = self._translate(_Ended())
        except grpc.RpcError as err:
            error = self._translate(err)
        self._fail(error)

    def _fail(self, error: RocketSparkError) -> None:
        with self._lock:
            self._broken = error
            pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                try:
                    future.set_exception(error)
                except concurrent.futures.InvalidStateError:
                    pass
        # gRPC reads ``_requests()`` on a thread of its own, blocked in ``outbox.get()``: end
        # the generator, or that thread waits forever for requests a broken stream never sends.
        self._outbox.put(_CLOSE)

    def close(self) -> None:
        self._outbox.put(_CLOSE)
        self._call.cancel()


class _Ended(grpc.RpcError):  # type: ignore[misc]
    """The server closed the stream; treated like an unavailable peer."""

    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNAVAILABLE

    def details(self) -> str:
        return "the connection was closed"
