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
    """A physical slice ``[start, end)`` of one segment, and how to name it to its broker."""

    broker_name: str
    address: str | None
    queue_id: int  # physical queue id
    gen: int
    static: bool
    epoch: int
    start: int  # physical, inclusive
    end: int  # physical, exclusive
    offset_delta: int  # logical = physical + delta

    @property
    def count(self) -> int:
        return self.end - self.start

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


def _logical_span(segment: Segment) -> tuple[int, int | None]:
    return segment.logic_offset, segment.logical_end


def plan_ranges(queue: LogicalQueue, start: int, end: int) -> list[SegmentRange]:
    """The segment slices holding logical ``[start, end)``, gaps skipped."""
    out = []
    for segment in queue.segments:
        seg_start, seg_end = _logical_span(segment)
        low = max(start, seg_start)
        high = end if seg_end is None else min(end, seg_end)
        if low < high:
            out.append(
                SegmentRange(
                    segment.broker_name,
                    segment.address,
                    segment.queue_id,
                    segment.gen,
                    queue.static,
                    queue.epoch,
                    segment.physical(low),
                    segment.physical(high),
                    segment.offset_delta,
                )
            )
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


def split(ranges: list[SegmentRange], parts: int) -> list[list[SegmentRange]]:
    """Split a queue's ranges into about ``parts`` pieces: at segment boundaries first, then
    the largest pieces in halves, so each Spark task reads from one broker."""
    pieces = [[r] for r in ranges if r.count > 0]
    while len(pieces) < parts:
        largest = max(range(len(pieces)), key=lambda i: pieces[i][0].count, default=None)
        if largest is None or pieces[largest][0].count < 2:
            break
        r = pieces[largest][0]
        middle = r.start + r.count // 2
        first = dataclasses.replace(r, end=middle)
        second = dataclasses.replace(r, start=middle)
        pieces[largest : largest + 1] = [[first], [second]]
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
