"""Send-latency fault tolerance (RocketMQ's ``MQFaultStrategy`` / ``LatencyFaultTolerance``).

With ``send_latency_fault_enable`` on, every send's latency marks its broker unavailable for
a while: the slower the send, the longer, by a table of thresholds. A failed send counts as
the worst latency. Producers then skip unavailable brokers, and when every broker is marked
they fall back to the least bad one (the one available again soonest).

The defaults are RocketMQ 4.x's table (the seeds'): latency 50/100/550/1000/2000/3000/15000
ms -> unavailable 0/0/30/60/120/180/600 s. RocketMQ 5.x uses 50/100/550/1800/3000/5000/15000
-> 0/0/2/5/6/10/30 s (``ROCKETMQ_5X_*``); both are configurable.
"""

from __future__ import annotations

import threading
import time
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

LATENCY_MAX_MS = (50, 100, 550, 1000, 2000, 3000, 15000)
NOT_AVAILABLE_MS = (0, 0, 30_000, 60_000, 120_000, 180_000, 600_000)
ROCKETMQ_5X_LATENCY_MAX_MS = (50, 100, 550, 1800, 3000, 5000, 15000)
ROCKETMQ_5X_NOT_AVAILABLE_MS = (0, 0, 2000, 5000, 6000, 10_000, 30_000)


@dataclass
class FaultItem:
    latency_ms: float
    available_at: float  # monotonic seconds


class LatencyFaultTolerance:
    def __init__(
        self, latency_max_ms: Sequence[int] = LATENCY_MAX_MS, not_available_ms: Sequence[int] = NOT_AVAILABLE_MS
    ) -> None:
        if len(latency_max_ms) != len(not_available_ms) or list(latency_max_ms) != sorted(latency_max_ms):
            raise ValueError("the latency table needs two lists of equal length, latencies ascending")
        self.latency_max_ms = tuple(latency_max_ms)
        self.not_available_ms = tuple(not_available_ms)
        self._items: dict[str, FaultItem] = {}
        self._lock = threading.Lock()

    def unavailable_ms(self, latency_ms: float) -> int:
        """The unavailable duration for a send that took ``latency_ms`` (RocketMQ's
        ``computeNotAvailableDuration``: the bucket of the largest threshold it reached)."""
        index = bisect_right(self.latency_max_ms, latency_ms) - 1
        return self.not_available_ms[index] if index >= 0 else 0

    def update(self, broker_name: str, latency_ms: float, *, failed: bool = False) -> None:
        if failed:
            latency_ms = max(latency_ms, self.latency_max_ms[-1])  # a failure is the worst latency
        duration = self.unavailable_ms(latency_ms)
        with self._lock:
            self._items[broker_name] = FaultItem(latency_ms, time.monotonic() + duration / 1000)

    def available(self, broker_name: str) -> bool:
        item = self._items.get(broker_name)
        return item is None or time.monotonic() >= item.available_at

    def least_bad(self, brokers: Sequence[str]) -> str | None:
        """Among ``brokers``, the one whose penalty ends first (unmarked ones win)."""
        if not brokers:
            return None
        return min(
            brokers,
            key=lambda b: (self._items[b].available_at, self._items[b].latency_ms) if b in self._items else (0.0, 0.0),
        )
