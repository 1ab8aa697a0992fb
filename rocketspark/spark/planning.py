"""Planning micro-batches: logical offset ranges onto physical segments, counts and limits.

Pure functions over :class:`~rocketspark.client.logical.LogicalQueue`. Offsets are logical;
a logical queue's offsets may jump at a segment switch (the gap a remap leaves), so counting
messages means counting inside segments, never subtracting offsets across a gap. A range
planned here reads the same records whenever it is read again: the records at a logical
offset never change, a remap only seals a segment at an end no planned range passed.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from rocketspark.client.logical import LogicalQueue, Segment


@dataclass(frozen=True, slots=True)
class SegmentRange:
    """A physical slice ``[start, end)`` of one segment of a logical queue.

    It carries the queue and segment as planned (they travel to the executor inside the
    partition), so a replay reads the same slice from the same segment whatever the route
    says by then."""

    queue: LogicalQueue
    segment: Segment
    start: int  # physical, inclusive
    end: int  # physical, exclusive

    @property
    def count(self) -> int:
        return self.end - self.start

    @property
    def offset_delta(self) -> int:
        """Logical minus physical offset in this segment."""
        return self.segment.offset_delta

    @property
    def logical_start(self) -> int:
        return self.start + self.offset_delta

    @property
    def logical_end(self) -> int:
        return self.end + self.offset_delta


@dataclass(frozen=True, slots=True)
class Bounds:
    """A logical queue's earliest retained offset and one past its newest."""

    low: int
    high: int


def plan_ranges(queue: LogicalQueue, start: int, end: int) -> list[SegmentRange]:
    """The segment slices holding logical ``[start, end)``, gaps skipped."""
    out = []
    for segment in queue.segments:
        low = max(start, segment.logic_offset)
        high = end if segment.logical_end is None else min(end, segment.logical_end)
        if low < high:
            out.append(SegmentRange(queue, segment, segment.physical(low), segment.physical(high)))
    return out


def count(queue: LogicalQueue, start: int, end: int) -> int:
    """Messages (offsets actually in segments) in logical ``[start, end)``."""
    return sum(r.count for r in plan_ranges(queue, start, end))


def advance(queue: LogicalQueue, start: int, end: int, n: int) -> int:
    """The logical offset after taking ``n`` messages from ``start`` (at most up to ``end``)."""
    if n <= 0:
        return start
    for r in plan_ranges(queue, start, end):
        if n < r.count:
            return r.logical_start + n
        n -= r.count
    return end


def split(ranges: list[SegmentRange], parts: int) -> list[SegmentRange]:
    """Split a queue's ranges into about ``parts`` pieces: at segment boundaries first, then
    the largest pieces in halves, so each Spark task reads from one broker."""
    pieces = [r for r in ranges if r.count > 0]
    while len(pieces) < parts:
        largest = max(range(len(pieces)), key=lambda i: pieces[i].count, default=None)
        if largest is None or pieces[largest].count < 2:
            break
        r = pieces[largest]
        middle = r.start + r.count // 2
        pieces[largest : largest + 1] = [dataclasses.replace(r, end=middle), dataclasses.replace(r, start=middle)]
    return pieces


def distribute(backlogs: dict[tuple[str, int], int], limit: int) -> dict[tuple[str, int], int]:
    """Share ``limit`` messages among queues in proportion to their backlog (Kafka's rule),
    never more than ``limit`` in all and never more than a queue's backlog."""
    total = sum(backlogs.values())
    if total <= limit:
        return dict(backlogs)
    shares = {key: backlog * limit // total for key, backlog in backlogs.items()}
    left = limit - sum(shares.values())
    for key in sorted(backlogs, key=lambda k: backlogs[k] - shares[k], reverse=True):
        if left <= 0:
            break
        if shares[key] < backlogs[key]:
            shares[key] += 1
            left -= 1
    return shares
