"""Admission control: a server holds at most a budget of request bytes at once.

Without it, memory grows with whatever clients send concurrently: six 100 MiB batches took a
broker to 1.35 GB. A request's bytes count from the moment the dispatcher receives them
until its handler has finished (a oneway request's, until its background work has). A
request that would take the total past the budget is refused at once with SYSTEM_BUSY,
which clients treat as "back off and retry" (RocketMQ's flow control answers the same way).
A single request larger than the whole budget is still admitted when nothing else is in
flight: otherwise it could never succeed. Requests of at most ``SMALL_REQUEST_BYTES`` (pulls,
heartbeats, offsets, admin calls) count but are never refused: refusing one would save
nothing worth the failure, and reads and ``rocketspark admin counters`` keep working while
large sends wait. No request may exceed ``MAX_REQUEST_BYTES``.

The dispatcher runs on one event loop, so the counts need no lock.
"""

from __future__ import annotations

from typing import Final

from rocketspark.errors import MessageTooLargeError, SystemBusyError

SMALL_REQUEST_BYTES: Final = 64 * 1024
MAX_REQUEST_BYTES: Final = 256 * 1024 * 1024  # a frame's body; the largest batch a broker may be set to take


class InflightBudget:
    """Bytes of requests in flight against ``limit_bytes`` (None: unbounded), with counters."""

    def __init__(self, limit_bytes: int | None, server_name: str) -> None:
        if limit_bytes is not None and limit_bytes <= 0:
            raise ValueError("the in-flight request budget must be positive (or None for no limit)")
        self.limit_bytes = limit_bytes
        self.server_name = server_name
        self.inflight_bytes = 0
        self.peak_bytes = 0
        self.refused = 0

    def admit(self, size: int) -> Ticket:
        """Count ``size`` bytes in, or raise SystemBusyError (and count the refusal); a
        request over ``MAX_REQUEST_BYTES`` is MessageTooLargeError."""
        if size > MAX_REQUEST_BYTES:
            raise MessageTooLargeError(
                f"a request of {size} bytes is over the largest {self.server_name} takes ({MAX_REQUEST_BYTES} "
                "bytes); send smaller batches (the Producer's batch_max_bytes)"
            )
        limit = self.limit_bytes
        if (
            limit is not None
            and size > SMALL_REQUEST_BYTES
            and self.inflight_bytes
            and self.inflight_bytes + size > limit
        ):
            self.refused += 1
            raise SystemBusyError(
                f"{self.server_name} is busy: {self.inflight_bytes} bytes of requests are in flight and this "
                f"{size}-byte request would pass its budget of {limit} bytes (max_inflight_request_bytes); "
                "retry after a short backoff (the rocketspark Producer does so within its send timeout)",
                inflightBytes=self.inflight_bytes,
                requestBytes=size,
                limitBytes=limit,
            )
        self.inflight_bytes += size
        self.peak_bytes = max(self.peak_bytes, self.inflight_bytes)
        return Ticket(self, size)


class Ticket:
    """One admitted request's bytes; ``release`` gives them back, once however often called
    (a request can end in several ways, e.g. cancelled before its task ever ran)."""

    __slots__ = ("_budget", "size")

    def __init__(self, budget: InflightBudget, size: int) -> None:
        self._budget: InflightBudget | None = budget
        self.size = size

    def release(self) -> None:
        if self._budget is not None:
            self._budget.inflight_bytes -= self.size
            self._budget = None
