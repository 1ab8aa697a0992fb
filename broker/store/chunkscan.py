"""Parsing a piece of copied log at once: the records a slave must index, as columns.

A slave indexes every record its master stored, at the master's ingest rate, on a core it
shares with everything else; parsing record by record into objects cost it 3 µs a record (a batch of one is a record).
Here only what is inherently sequential runs in Python (walking the chain of record sizes);
every header field, topic and payload length is gathered and checked with numpy over all
the records together (each record must lie at the log offset it names, and its lengths must
add up), and entries are built one array per queue.

Records' own CRCs are not checked here: the bytes arrived under the CRC of the piece they
came in (:mod:`broker.ha.transfer`), so they are the master's bytes, and every reader and
the scrub check each record's CRC. Checking them again cost the slave more than anything
else it does (0.45 µs a record).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from broker.store.consumequeue import ENTRY_DTYPE
from rocketspark.codec import layout
from rocketspark.codec.layout import RecordCorrupted


@dataclass(frozen=True, slots=True)
class QueueRun:
    """The records of one queue in a chunk, in log order."""

    topic: str
    queue_id: int
    phys: npt.NDArray[np.int64]
    sizes: npt.NDArray[np.int64]
    queue_offsets: npt.NDArray[np.int64]  # of each record's first message
    counts: npt.NDArray[np.int64]
    tags: npt.NDArray[np.uint64]
    store_ms: npt.NDArray[np.int64]

    @property
    def end_offset(self) -> int:
        return int(self.queue_offsets[-1] + self.counts[-1])

    @property
    def contiguous(self) -> bool:
        """Whether each record's messages follow the previous record's (the usual case)."""
        return bool(np.array_equal(self.queue_offsets[1:], (self.queue_offsets + self.counts)[:-1]))

    def entries(self) -> bytes:
        """The consume-queue entries of these records, ready to append."""
        out = np.empty(len(self.phys), ENTRY_DTYPE)
        out["phys"], out["size"], out["tags"] = self.phys, self.sizes, self.tags
        out["base"], out["count"], out["store_ms"] = self.queue_offsets, self.counts, self.store_ms
        return out.tobytes()


@dataclass(frozen=True, slots=True)
class ChunkScan:
    runs: list[QueueRun]
    records: int
    used: int  # bytes of whole records, gaps included, from the start
    sealed: bool  # a blank record follows them: the segment ends there


def scan_chunk(buf: bytes | memoryview, base: int, capacity: int) -> ChunkScan:
    """The whole records at the start of ``buf`` (``base``: its log offset), by queue.
    ``capacity`` is how many bytes the segment has from ``base``: a record claiming more is
    damage, not a record still arriving. A record cut off by the end of ``buf`` is left for
    later; a damaged one raises ``RecordCorrupted`` (its position relative to ``buf``)."""
    starts, used, sealed = _walk(buf, capacity)
    if not starts:
        return ChunkScan([], 0, used, sealed)
    return ChunkScan(_columns(buf, base, np.asarray(starts, np.int64)), len(starts), used, sealed)


def _walk(buf: bytes | memoryview, capacity: int) -> tuple[list[int], int, bool]:
    """Record starts; bytes used; whether a blank record ends them."""
    view = memoryview(buf)
    size, pos, starts = len(view), 0, []
    head = layout.PREFIX.unpack_from
    while size - pos >= layout.MIN_BLANK_SIZE:
        total, magic = head(view, pos)
        if magic == layout.BATCH_MAGIC:
            if total < layout.HEADER_SIZE or total > capacity - pos:
                raise RecordCorrupted(f"impossible record size {total} at {pos}", pos)
            if pos + total > size:
                break  # the next chunk completes it
            starts.append(pos)
            pos += total
        elif magic == layout.BLANK_MAGIC and total == capacity - pos:
            if pos + total > size:
                break  # the padding that ends the segment, not all here yet
            return starts, pos, True
        elif magic == layout.GAP_MAGIC and layout.MIN_BLANK_SIZE <= total <= capacity - pos:
            if pos + total > size:
                break
            pos += total  # a region the other replica's recovery cut out: copied, not indexed
        else:
            raise RecordCorrupted(f"bad magic 0x{magic:08X} at {pos}", pos)
    return starts, pos, False


def _gather(data: npt.NDArray[np.uint8], at: npt.NDArray[np.int64], width: int) -> npt.NDArray[np.uint8]:
    """``width`` bytes from each position in ``at``, one row each."""
    rows: npt.NDArray[np.uint8] = data[at[:, None] + np.arange(width)]
    return rows


def _columns(buf: bytes | memoryview, base: int, starts: npt.NDArray[np.int64]) -> list[QueueRun]:
    data = np.frombuffer(buf, np.uint8)
    heads = _gather(data, starts, layout.HEADER_SIZE).view(layout.HEADER_DTYPE)[:, 0]
    totals = heads["total"].astype(np.int64)
    topic_lens = heads["topic_len"].astype(np.int64)
    misplaced = heads["commitlog_offset"].astype(np.int64) != base + starts
    if misplaced.any():
        raise _corrupt(starts, misplaced, "a record whose stored log offset is not where it lies")
    if (bad := (heads["version"] != layout.VERSION) & (heads["version"] != layout.V2)).any():
        raise _corrupt(starts, bad, "a record of an unknown version")
    counts = heads["count"].astype(np.int64)
    topic_at = layout.HEADER_SIZE - layout.ID_SIZE * (heads["version"] == layout.V2).astype(np.int64)
    if (bad := (counts < 1) | (topic_at + topic_lens > totals)).any():
        raise _corrupt(starts, bad, "a record whose count or topic length does not fit it")
    topic_ids, topics = _topics(data, starts, topic_at, topic_lens)
    queue_ids = heads["queue_id"].astype(np.int64)
    keys = topic_ids * (1 << 32) + queue_ids
    order = np.argsort(keys, kind="stable")  # by queue, log order within each
    bounds = np.flatnonzero(np.diff(keys[order])) + 1
    phys, offsets = base + starts, heads["base_offset"].astype(np.int64)
    tags, store_ms = heads["tag_summary"].astype(np.uint64), heads["store_ms"].astype(np.int64)
    runs = []
    for rows in np.split(order, bounds):
        first = int(rows[0])
        runs.append(
            QueueRun(
                topics[int(topic_ids[first])],
                int(queue_ids[first]),
                phys[rows],
                totals[rows],
                offsets[rows],
                counts[rows],
                tags[rows],
                store_ms[rows],
            )
        )
    return runs


def _topics(
    data: npt.NDArray[np.uint8], starts: npt.NDArray[np.int64], at: npt.NDArray[np.int64], lens: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.int64], list[str]]:
    """Each record's topic (``at`` past its start) as an index into the list of the chunk's topics."""
    ids = np.empty(len(starts), np.int64)
    names: list[str] = []
    for length in np.unique(lens).tolist():
        if length == 0:
            raise _corrupt(starts, lens == 0, "a record without a topic")
        rows = np.flatnonzero(lens == length)
        raw = _gather(data, starts[rows] + at[rows], length)
        distinct, inverse = np.unique(raw.view(f"V{length}")[:, 0], return_inverse=True)
        for value in distinct:
            try:
                names.append(bytes(value).decode())
            except UnicodeDecodeError:
                raise _corrupt(starts, lens == length, "a topic name that is not UTF-8") from None
        ids[rows] = len(names) - len(distinct) + inverse.reshape(-1)
    return ids, names


def _corrupt(starts: npt.NDArray[np.int64], bad: npt.NDArray[np.bool_], what: str) -> RecordCorrupted:
    position = int(starts[int(np.argmax(bad))])
    return RecordCorrupted(f"{what} at {position}", position)
