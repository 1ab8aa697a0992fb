"""Planning micro-batches: a queue's planned ranges split among tasks, and limits.

Pure functions. Logical ranges become physical segment slices, and messages are counted inside
segments (never by subtracting offsets across the gap a remap leaves), in
:mod:`rocketspark.client.logical` (``plan_ranges``, ``count``, ``advance``): the one rule every
lag figure uses. A range planned here reads the same records whenever it is read again: the
records at a logical offset never change, a remap only seals a segment at an end no planned
range passed.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from rocketspark.client.logical import SegmentRange


@dataclass(frozen=True, slots=True)
class Bounds:
    """A logical queue's earliest retained offset and one past its newest."""

    low: int
    high: int


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
