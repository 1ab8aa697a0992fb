"""Long polling: a pull that finds nothing waits here until a send wakes it or time runs out.

RocketMQ's ``PullRequestHoldService`` checks suspended pulls on a timer; we wake them the
moment a message for their queue is stored, which is what keeps produce-to-pull latency
below a millisecond.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict

Key = tuple[str, int]


class LongPollHub:
    def __init__(self) -> None:
        self._waiters: defaultdict[Key, list[asyncio.Future[bool]]] = defaultdict(list)
        self.closing = False  # set at shutdown: held pulls answer at once instead of waiting again

    async def wait(self, key: Key, timeout_s: float) -> bool:
        """Wait for new data on ``key``; True if woken by data, False on timeout or shutdown.
        The timeout is a timer on the loop that settles the same future (``wait_for`` would
        add a waiter and two turns of the loop to every wake-up: a message's latency)."""
        if self.closing:
            return False
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bool] = loop.create_future()
        timer = loop.call_later(timeout_s, _settle, future, False)
        waiters = self._waiters[key]
        waiters.append(future)
        try:
            return await future
        finally:
            timer.cancel()
            if future in waiters:
                waiters.remove(future)
            # notify() may have detached this list already and a re-waiting poller started a
            # new one under the same key: only drop the key if it still holds our list.
            if not waiters and self._waiters.get(key) is waiters:
                del self._waiters[key]

    def notify(self, key: Key) -> None:
        waiters = self._waiters.pop(key, None)
        if waiters:
            for future in waiters:
                _settle(future, True)

    def notify_topic(self, topic: str) -> None:
        """Wake every pull held on one topic (its queues changed shape or it went away)."""
        for key in [k for k in self._waiters if k[0] == topic]:
            self.notify(key)

    def close(self) -> None:
        """Shutdown: wake every held pull, and make later waits return at once."""
        self.closing = True
        for key in list(self._waiters):
            self.notify(key)

    @property
    def waiting(self) -> int:
        return sum(len(w) for w in self._waiters.values())


def _settle(future: asyncio.Future[bool], woken: bool) -> None:
    if not future.done():
        future.set_result(woken)
