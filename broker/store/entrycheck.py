"""Checking consume-queue entries against the records they point to, before a read is answered.

The commit log is the truth; a consume-queue entry is only a pointer into it. Every record
carries its own topic, queue id, first queue offset, count and commit-log offset in its header
(see :mod:`rocketspark.codec.layout`), so a pull can prove, for every record it is about to
return, that the entry led to the right one. An entry copied from another queue, garbage in
an entry, or an entry pointing into a damaged region all fail here, and the store answers
with an error instead of another queue's message or an empty ``FOUND``.

The check is a handful of numpy comparisons over the gathered headers of the whole read, so
it costs microseconds per pull, not per record.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rocketspark.codec import layout

_HEADER_SPAN = np.arange(layout.HEADER_SIZE, dtype=np.int64)


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
) -> Mismatch | None:
    """Check the records of ``body`` (the entries' records, concatenated in order) against the
    entries that found them: ``bases``, ``counts``, ``phys`` and ``sizes``, one per record."""
    n = len(sizes)
    if n == 0:
        return None
    size_a = np.asarray(sizes, dtype=np.int64)
    floor = layout.HEADER_SIZE + len(topic)  # a version-2 record's shorter header still leaves it this long
    small = np.flatnonzero(size_a < floor)
    limit = int(small[0]) if small.size else n
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


def _describe(body: bytes, pos: int, size: int) -> str:
    """What the entry led to instead of its record, for the error and the log."""
    head = layout.HEADER.unpack_from(body, pos)
    total, magic, qid, qoff, phys, tlen, count = head[0], head[1], head[3], head[4], head[5], head[11], head[12]
    if magic != layout.BATCH_MAGIC:
        return f"no record there (magic 0x{magic:08X}): damaged or not a record boundary"
    if total != size:
        return f"the record there is {total} bytes, the entry says {size}"
    at = pos + layout.head_size(head[9])
    topic = bytes(body[at : at + min(tlen, size)])
    where = f"queue offset {qoff}" if count == 1 else f"queue offsets {qoff}-{qoff + count - 1}"
    return f"the record there belongs to {topic.decode(errors='replace')}/{qid} at {where} (log offset {phys})"
