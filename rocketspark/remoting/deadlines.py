"""Deadlines of requests in flight: one thread for the whole process fails each request whose
time is up, whether or not anybody waits on it (an async call's future fails at its deadline
too), so a peer that never answers produces a timeout, never a hang."""

from __future__ import annotations

import concurrent.futures
import heapq
import itertools
import os
import threading
import time
import weakref
from collections.abc import Callable

from rocketspark.errors import RocketSparkError
from rocketspark.protocol.command import RemotingCommand

Expire = Callable[[], RocketSparkError]
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
