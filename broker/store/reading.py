"""Reading a range of one queue: its entries, then the records they point to.

A read never answers from an entry it has not proven right: the records are gathered from
the commit log and each is checked against the entry that found it
(:mod:`broker.store.entrycheck`). An entry that disagrees makes the queue be rebuilt from
the log, and the read is refused with an error naming the queue and offset; a queue that
disagrees again right after its rebuild is damaged in the log itself, and says so.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import Enum

from broker.store.commitlog import CommitLog
from broker.store.consumequeue import ENTRY, ConsumeQueue
from broker.store.entrycheck import Mismatch, first_mismatch
from broker.store.stats import StoreStats
from rocketspark.codec.layout import summary_matches
from rocketspark.errors import QueueRebuiltError, StoreDamagedError

log = logging.getLogger(__name__)

MAX_FILTER_SCAN = 16_000  # batches a pull may skip (filtered out, lost) before it answers (RocketMQ's cap)
REBUILD_BACKOFF_S = 10.0  # a queue that disagrees again this soon after a rebuild is not rebuilt again


class GetStatus(Enum):
    """Expected outcomes of a read (RocketMQ's ``GetMessageStatus``)."""

    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"  # entries scanned, none passed the tag filter
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"  # the queue is empty
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"  # no such queue on this broker
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"  # below min: expired or never existed
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"  # == max: caught up
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"  # > max


@dataclass(frozen=True, slots=True)
class GetResult:
    status: GetStatus
    body: bytes  # whole batch records, concatenated as stored
    count: int  # messages in them from the offset asked for on
    next_offset: int
    min_offset: int
    max_offset: int


class QueueReader:
    """Reads ranges for the store; ``rebuild(topic, queue_id)`` re-indexes a queue that lied."""

    def __init__(self, commitlog: CommitLog, stats: StoreStats, rebuild: Callable[[str, int], None]) -> None:
        self.commitlog = commitlog
        self.stats = stats
        self.rebuild = rebuild
        self.rebuilt_at: dict[tuple[str, int], float] = {}  # monotonic time of each queue's last rebuild

    def get(
        self,
        cq: ConsumeQueue | None,
        offset: int,
        max_messages: int,
        max_bytes: int,
        tag_hashes: frozenset[int] | None,
        end_offset: int | None,
    ) -> GetResult:
        """The store's ``get`` on queue ``cq`` (None: no such queue): a status for an offset
        outside the queue, else a range read that stops before ``end_offset``."""
        lo, hi = (cq.min_offset, cq.max_offset) if cq is not None else (0, 0)
        if hi == 0 and offset == 0:
            status = GetStatus.NO_MESSAGE_IN_QUEUE if cq is not None else GetStatus.NO_MATCHED_LOGIC_QUEUE
            return GetResult(status, b"", 0, 0, lo, hi)
        if offset < lo:
            return GetResult(GetStatus.OFFSET_TOO_SMALL, b"", 0, lo, lo, hi)
        if offset == hi:
            return GetResult(GetStatus.OFFSET_OVERFLOW_ONE, b"", 0, offset, lo, hi)
        if offset > hi:
            return GetResult(GetStatus.OFFSET_OVERFLOW_BADLY, b"", 0, hi, lo, hi)
        assert cq is not None
        stop = hi if end_offset is None else min(hi, max(end_offset, offset + 1))
        return self.read_range(cq, offset, max_messages, max_bytes, tag_hashes, stop)

    def read_range(
        self,
        cq: ConsumeQueue,
        offset: int,
        max_messages: int,
        max_bytes: int,
        tag_hashes: frozenset[int] | None,
        stop: int,
    ) -> GetResult:
        """Whole batch records from the one holding ``offset``: until ``max_messages`` messages
        from ``offset`` on, ``max_bytes`` (at least one batch) or ``stop``. Batches whose tag
        summary cannot match the filter are skipped; the reader drops, message by message,
        what lies before ``offset`` or outside the filter."""
        log_min = self.commitlog.min_offset
        bases: list[int] = []
        expected: list[int] = []  # where the read stood at each entry: its offset, if the entry is right
        counts: list[int] = []
        physes: list[int] = []
        sizes: list[int] = []
        nbytes = messages = 0
        cursor = offset
        scan_budget = MAX_FILTER_SCAN
        slot, chunk = cq.find(offset)  # the entries its search read already come first
        done = False
        while slot < cq.max_slot and not done:  # `not done and ...`: mypyc 2.4.1's C for it does not compile
            if not chunk:
                chunk = cq.read(slot, 64 if tag_hashes is None else 1024)
                if not chunk:
                    break
            for phys, size, tags, base, count, _store in ENTRY.iter_unpack(chunk):
                slot += 1
                end = base + count
                if size == 0 or phys < log_min or (tag_hashes is not None and not summary_matches(tags, tag_hashes)):
                    cursor = max(cursor, end)  # lost, expired, or no message can match the filter
                    scan_budget -= 1
                    if cursor >= stop or scan_budget <= 0:
                        done = True
                        break
                    continue
                if sizes and nbytes + size > max_bytes:
                    done = True
                    break
                bases.append(base)
                expected.append(cursor)
                counts.append(count)
                physes.append(phys)
                sizes.append(size)
                nbytes += size
                messages += end - max(base, cursor)
                cursor = end
                if messages >= max_messages or cursor >= stop:
                    done = True
                    break
            chunk = b""
        body = self._gather(cq, bases, expected, counts, physes, sizes)
        self.stats.read(cq.topic, messages, len(body))
        status = GetStatus.FOUND if sizes else GetStatus.NO_MATCHED_MESSAGE
        return GetResult(status, body, messages, cursor, cq.min_offset, cq.max_offset)

    def _gather(
        self,
        cq: ConsumeQueue,
        bases: list[int],
        expected: list[int],
        counts: list[int],
        physes: list[int],
        sizes: list[int],
    ) -> bytes:
        """The records the entries point to, in one buffer, each proven to be its entry's own
        (:mod:`broker.store.entrycheck`); a disagreeing entry is never answered from."""
        parts: list[bytes] = []
        runs = _runs(physes, sizes, self.commitlog.segment_bytes)
        for first, start, end in runs:
            data = self.commitlog.read(start, end - start)
            if data is None:
                where = "past the end of the commit log" if start >= self.commitlog.min_offset else "expired"
                self._index_disagrees(cq, Mismatch(first, expected[first], start, f"the log has no data ({where})"))
            parts.append(data or b"")
        body = b"".join(parts)
        bad = first_mismatch(body, cq.topic.encode(), cq.queue_id, bases, counts, physes, sizes)
        if bad is not None:  # named by where the read stood: a damaged entry's own base may be garbage
            self._index_disagrees(cq, replace(bad, queue_offset=expected[bad.index]))
        return body

    def _index_disagrees(self, cq: ConsumeQueue, bad: Mismatch) -> None:
        """Rebuild the queue whose entry led astray, then refuse the read that found it."""
        where = f"{cq.topic}/{cq.queue_id} at queue offset {bad.queue_offset}"
        detail = f"its consume-queue entry points at log offset {bad.phys}, where {bad.reason}"
        self.stats.index_mismatches += 1
        last = self.rebuilt_at.get((cq.topic, cq.queue_id))
        if last is not None and time.monotonic() - last < REBUILD_BACKOFF_S:
            raise StoreDamagedError(
                f"message {where} cannot be read: {detail}, and the queue was rebuilt from the commit log "
                f"{time.monotonic() - last:.0f} s ago already. The commit log itself is damaged there; see the "
                "broker log for the damaged range"
            )
        log.error("consume queue %s disagrees with the commit log: %s; rebuilding it from the log", where, detail)
        self.rebuild(cq.topic, cq.queue_id)
        raise QueueRebuiltError(
            f"message {where} was not returned: {detail}. The broker rebuilt the queue from its commit log; "
            "retry the read"
        )


def _runs(physes: list[int], sizes: list[int], segment_bytes: int) -> list[tuple[int, int, int]]:
    """Contiguous stretches of the log to read: (index of its first record, start, end). A
    stretch never crosses a segment boundary."""
    runs: list[tuple[int, int, int]] = []
    end = -1
    for i, (phys, size) in enumerate(zip(physes, sizes, strict=True)):
        if phys == end and phys % segment_bytes:
            first, start, _ = runs[-1]
            end = phys + size
            runs[-1] = (first, start, end)
        else:
            end = phys + size
            runs.append((i, phys, end))
    return runs
