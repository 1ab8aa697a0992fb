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
        self._waiters: defaultdict[Key, list[asyncio.Future[None]]] = defaultdict(list)
        self.closing = False  # set at shutdown: held pulls answer at once instead of waiting again

    async def wait(self, key: Key, timeout_s: float) -> bool:
        """Wait for new data on ``key``; True if woken by data, False on timeout or shutdown."""
        if self.closing:
            return False
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        waiters = self._waiters[key]
        waiters.append(future)
        try:
            await asyncio.wait_for(future, timeout_s)
            return True
        except TimeoutError:
            return False
        finally:
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
                if not future.done():
                    future.set_result(None)

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
