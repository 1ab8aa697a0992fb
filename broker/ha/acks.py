"""What the master knows of its slaves: how far each has copied, and sends waiting for them.

A slave's every copy request names the log offset it asks from, which is also how far it
holds the log: that is its acknowledgement. A send with ``in_sync_replicas`` = N waits until
N members of the SyncStateSet, the master included, hold its last byte.

The master also decides who belongs in the SyncStateSet (the controller only records it): a
slave joins once it has caught up with the log's end, and leaves when it has not been caught
up for ``max_lag_ms`` (RocketMQ's ``haMaxTimeSlaveNotCatchup``).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field


@dataclass
class SlaveProgress:
    offset: int = 0
    caught_up_at: float = field(default_factory=time.monotonic)  # last time it held the log's end
    seen_at: float = field(default_factory=time.monotonic)


@dataclass(eq=False)
class _Waiter:
    offset: int
    members: set[int]
    needed: int
    future: asyncio.Future[bool]  # True: held by enough; False: the deadline passed


class AckTracker:
    """Per slave replica id: its progress. Single-threaded (the broker's event loop)."""

    def __init__(self, max_lag_ms: int) -> None:
        self.max_lag_s = max_lag_ms / 1000
        self.slaves: dict[int, SlaveProgress] = {}
        self._waiters: set[_Waiter] = set()

    def reset(self, members: set[int]) -> None:
        """A new term: forget what was known; the members get a full lag period to report."""
        self.slaves = {rid: SlaveProgress(0) for rid in members}

    def report(self, replica_id: int, offset: int, log_end: int) -> None:
        now = time.monotonic()
        progress = self.slaves.setdefault(replica_id, SlaveProgress(offset))
        progress.offset = offset  # what it holds now: lower than before if it cut a damaged copy
        progress.seen_at = now
        if progress.offset >= log_end:
            progress.caught_up_at = now
        for waiter in [w for w in self._waiters if self.holding(w.offset, w.members) >= w.needed]:
            self._waiters.discard(waiter)  # only the sends this report completes wake up
            if not waiter.future.done():
                waiter.future.set_result(True)

    def holding(self, offset: int, members: set[int]) -> int:
        """How many of ``members`` (slave replica ids) hold the log up to ``offset``."""
        return sum(1 for rid in members if rid in self.slaves and self.slaves[rid].offset >= offset)

    async def wait(self, offset: int, members: set[int], needed: int, timeout_s: float) -> bool:
        """Wait until ``needed`` of ``members`` hold ``offset``; False on timeout."""
        if self.holding(offset, members) >= needed:
            return True
        loop = asyncio.get_running_loop()
        waiter = _Waiter(offset, members, needed, loop.create_future())
        self._waiters.add(waiter)
        # A timer that settles the future, not asyncio.timeout: handlers may run outside any
        # task (rocketspark.remoting.eager.eagerly), and asyncio.timeout needs one.
        timer = loop.call_later(timeout_s, _expire, waiter.future)
        try:
            if await waiter.future:
                return True
            return self.holding(offset, members) >= needed
        finally:
            timer.cancel()
            self._waiters.discard(waiter)

    def in_sync(self, current: set[int], log_end: int) -> set[int]:
        """The slaves that belong in the SyncStateSet now: members not lagging too long, plus
        any that has caught up."""
        now = time.monotonic()
        keep = {rid for rid in current if rid in self.slaves and now - self.slaves[rid].caught_up_at <= self.max_lag_s}
        join = {rid for rid, p in self.slaves.items() if p.offset >= log_end and now - p.seen_at <= self.max_lag_s}
        return keep | join


def _expire(future: asyncio.Future[bool]) -> None:
    if not future.done():
        future.set_result(False)
