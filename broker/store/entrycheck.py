"""Checking consume-queue entries against the records they point to, before a read is answered.

The commit log is the truth; a consume-queue entry is only a pointer into it. Every record
carries its own topic, queue id, first queue offset, count and commit-log offset in its header
(see :mod:`rocketspark.codec.layout`), so a pull can prove, for every record it is about to
return, that the entry led to the right one. An entry copied from another queue, garbage in
an entry, or an entry pointing into a damaged region all fail here, and the store answers
with an error instead of another queue's message or an empty ``FOUND``.

The check is a handful of numpy comparisons over the gathered headers of the whole read, so
it costs microseconds per pull, not per record; a read of a few records (a consumer following
a service's one-message sends) is checked record by record with ``struct`` instead, as numpy's
fixed cost per call would be most of what the read costs. Both give the same answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rocketspark.codec import layout

_HEADER_SPAN = np.arange(layout.HEADER_SIZE, dtype=np.int64)
SMALL_READ = 8  # reads of at most this many records are checked one by one
Entries = tuple[Sequence[int], Sequence[int], Sequence[int], Sequence[int]]  # bases, counts, phys, sizes


@dataclass(frozen=True, slots=True)
class Mismatch:
    """The first entry of a read that did not lead to its own record."""

    index: int  # position in the read
    queue_offset: int  # of the batch's first message
    phys: int
    reason: str


def first_mismatch(
    body: bytes,
    topic: bytes,
    queue_id: int,
    bases: Sequence[int],
    counts: Sequence[int],
    phys: Sequence[int],
    sizes: Sequence[int],
    *,
    small: int = SMALL_READ,
) -> Mismatch | None:
    """Check the records of ``body`` (the entries' records, concatenated in order) against the
    entries that found them: ``bases``, ``counts``, ``phys`` and ``sizes``, one per record.
    ``small``: the most records checked one by one (0: every read with numpy)."""
    n = len(sizes)
    if n == 0:
        return None
    if n <= small:
        return _first_mismatch_small(body, topic, queue_id, (bases, counts, phys, sizes))
    size_a = np.asarray(sizes, dtype=np.int64)
    floor = layout.HEADER_SIZE + len(topic)  # a version-2 record's shorter header still leaves it this long
    short = np.flatnonzero(size_a < floor)
    limit = int(short[0]) if short.size else n
    starts = np.zeros(n, dtype=np.int64)
    np.cumsum(size_a[:-1], out=starts[1:])
    if limit < n or int(starts[-1] + size_a[-1]) != len(body):
        i = limit if limit < n else n - 1
        return Mismatch(i, bases[i], phys[i], f"the entry's size {sizes[i]} cannot hold a record of this topic")
    raw = np.frombuffer(body, dtype=np.uint8)
    heads = raw[starts[:, None] + _HEADER_SPAN].view(layout.HEADER_DTYPE)[:, 0]
    bad = heads["magic"] != layout.BATCH_MAGIC
    bad |= heads["total"] != size_a
    bad |= heads["queue_id"] != queue_id
    bad |= heads["base_offset"] != np.asarray(bases, dtype=np.uint64)
    bad |= heads["count"] != np.asarray(counts, dtype=np.uint64)
    bad |= heads["commitlog_offset"] != np.asarray(phys, dtype=np.uint64)
    bad |= heads["topic_len"] != len(topic)
    if not bad.any() and topic:
        topic_at = layout.HEADER_SIZE - layout.ID_SIZE * (heads["version"] == layout.V2).astype(np.int64)
        names = raw[(starts + topic_at)[:, None] + np.arange(len(topic), dtype=np.int64)]
        bad |= (names != np.frombuffer(topic, dtype=np.uint8)).any(axis=1)
    if not bad.any():
        return None
    i = int(np.argmax(bad))
    return Mismatch(i, bases[i], phys[i], _describe(body, int(starts[i]), sizes[i]))


def _first_mismatch_small(body: bytes, topic: bytes, queue_id: int, entries: Entries) -> Mismatch | None:
    """``first_mismatch`` record by record, in the same order of checks: sizes, then every
    record's header, then every record's topic."""
    bases, counts, phys, sizes = entries
    floor = layout.HEADER_SIZE + len(topic)
    starts: list[int] = []
    pos = 0
    for i, size in enumerate(sizes):
        if size < floor:
            return Mismatch(i, bases[i], phys[i], f"the entry's size {size} cannot hold a record of this topic")
        starts.append(pos)
        pos += size
    if pos != len(body):
        i = len(sizes) - 1
        return Mismatch(i, bases[i], phys[i], f"the entry's size {sizes[i]} cannot hold a record of this topic")
    versions: list[int] = []
    for i, start in enumerate(starts):
        head = layout.HEADER.unpack_from(body, start)
        if (
            head[layout.F_MAGIC] != layout.BATCH_MAGIC
            or head[layout.F_TOTAL] != sizes[i]
            or head[layout.F_QUEUE_ID] != queue_id
            or head[layout.F_BASE_OFFSET] != bases[i]
            or head[layout.F_COUNT] != counts[i]
            or head[layout.F_LOG_OFFSET] != phys[i]
            or head[layout.F_TOPIC_LEN] != len(topic)
        ):
            return Mismatch(i, bases[i], phys[i], _describe(body, start, sizes[i]))
        versions.append(head[layout.F_VERSION])
    if topic:
        for i, start in enumerate(starts):
            at = start + layout.head_size(versions[i])
            if body[at : at + len(topic)] != topic:
                return Mismatch(i, bases[i], phys[i], _describe(body, start, sizes[i]))
    return None


def _describe(body: bytes, pos: int, size: int) -> str:
    """What the entry led to instead of its record, for the error and the log."""
    head = layout.HEADER.unpack_from(body, pos)
    total, magic, qid, qoff, phys, tlen, count = (
        head[layout.F_TOTAL],
        head[layout.F_MAGIC],
        head[layout.F_QUEUE_ID],
        head[layout.F_BASE_OFFSET],
        head[layout.F_LOG_OFFSET],
        head[layout.F_TOPIC_LEN],
        head[layout.F_COUNT],
    )
    if magic != layout.BATCH_MAGIC:
        return f"no record there (magic 0x{magic:08X}): damaged or not a record boundary"
    if total != size:
        return f"the record there is {total} bytes, the entry says {size}"
    at = pos + layout.head_size(head[layout.F_VERSION])
    topic = bytes(body[at : at + min(tlen, size)])
    where = f"queue offset {qoff}" if count == 1 else f"queue offsets {qoff}-{qoff + count - 1}"
    return f"the record there belongs to {topic.decode(errors='replace')}/{qid} at {where} (log offset {phys})"
