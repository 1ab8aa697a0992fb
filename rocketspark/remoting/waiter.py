"""A synchronous call's answer, waited for in the caller's thread (:mod:`rocketspark.remoting.connection`).

The caller blocks on a lock that whoever reads the connection releases: the cheapest hand-off
between two threads CPython has (a Future adds a condition, callbacks and a deadline entry,
for a caller that waits anyway). The same gate also opens when the connection hands the caller
its read role (``promote``): the caller then reads the socket itself, its own answer included,
and no other thread has to wake for it.
"""

from __future__ import annotations

import threading

from rocketspark.protocol.command import RemotingCommand


class Waiter:
    """Settled once (only whoever takes it out of the pending table settles it); promoted at
    most once: by its own caller when it finds the read role free, or, under the connection's
    lock, by the role's holder handing it over."""

    __slots__ = ("_gate", "error", "promoted", "result")

    def __init__(self) -> None:
        self._gate = threading.Lock()
        self._gate.acquire()
        self.result: RemotingCommand | None = None
        self.error: BaseException | None = None
        self.promoted = False  # it holds the connection's read role

    @property
    def settled(self) -> bool:
        return self.result is not None or self.error is not None

    def _open(self) -> None:
        try:
            self._gate.release()
        except RuntimeError:
            pass  # already open: a promotion and an answer crossed, and one wake-up serves both

    def set_result(self, result: RemotingCommand) -> None:
        self.result = result
        self._open()

    def set_exception(self, error: BaseException) -> None:
        self.error = error
        self._open()

    def promote(self) -> None:
        """Hand it the read role (the caller reads until its answer is in, then passes it on)."""
        self.promoted = True
        self._open()

    def done(self) -> bool:
        return False  # it leaves the pending table as it is settled

    def wait(self, timeout_s: float | None) -> bool:
        """Whether it was settled or promoted within ``timeout_s``."""
        return self._gate.acquire(timeout=-1 if timeout_s is None else timeout_s)
