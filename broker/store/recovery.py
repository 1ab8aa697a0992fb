"""Crash recovery: make the commit log and consume queues agree again, and say what was cut.

Steps, in RocketMQ's order:

1. **Commit log.** Scan from the last checkpoint (everything before it was on disk, records
   and queue entries alike), checking every record's CRC; from the start of the log when
   there is no checkpoint or a sealed segment was found short. A torn or corrupt tail is cut;
   a damaged region in the middle is marked as a gap so the intact records after it stay
   readable.
2. **Consume queues.** After a crash, a queue that has records past the scan start is cut back
   to it when the scan meets its first such record, and those records are indexed again. A
   record lost in the middle of a queue leaves a tombstone (an entry of size 0), so later
   offsets keep their meaning. After a clean stop no queue is touched. Queues the scan does not
   meet are not even opened: they are checked when first used (:mod:`broker.store.queues`).
3. **Damaged queues.** A queue with a missing file, or shorter than the last checkpoint says
   it was, is deleted and rebuilt from the whole commit log.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from broker.store.commitlog import CommitLog
from broker.store.consumequeue import ConsumeQueue
from broker.store.scan import Damage, ScannedRecord, SegmentScan, scan_segment
from rocketspark.codec import layout

log = logging.getLogger(__name__)

QueueKey = tuple[str, int]


class QueueRegistry(Protocol):
    """How recovery reaches the store's consume queues."""

    def queue(self, topic: str, queue_id: int) -> ConsumeQueue: ...  # load or create
    def drop_queue(self, topic: str, queue_id: int) -> None: ...  # delete files, forget it
    def accepts(self, topic: str, phys: int) -> bool: ...  # is this record part of a live topic?


@dataclass
class RecoveryReport:
    """What recovery found and did; the broker logs ``lines()`` at start-up."""

    abnormal: bool = False
    scanned_from: int = 0
    log_end: int = 0
    records_scanned: int = 0
    damage: list[Damage] = field(default_factory=list)
    queue_entries_dropped: int = 0
    redispatched: int = 0
    tombstones: int = 0
    rebuilt_queues: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        kind = "after a crash" if self.abnormal else "after a clean stop"
        out = [
            f"store recovery {kind}: scanned {self.records_scanned} records from log offset {self.scanned_from}; "
            f"log ends at {self.log_end}; {self.redispatched} queue entries re-dispatched"
        ]
        out += [f"store recovery cut {d}" for d in self.damage]
        if self.tombstones:
            out.append(f"store recovery left {self.tombstones} tombstones for records lost mid-queue")
        out += [f"store recovery rebuilt consume queue {q} from the commit log" for q in self.rebuilt_queues]
        return out


class Redispatcher:
    """Indexes scanned records into their queues; detects queues it cannot repair in place."""

    def __init__(
        self,
        registry: QueueRegistry,
        *,
        from_log_start: bool,
        indexed: dict[QueueKey, int] | None = None,
        cut_from: int | None = None,
        every_topic: bool = False,
    ) -> None:
        self.registry = registry
        self.every_topic = every_topic  # a slave indexes what its master stored, topics known or not yet
        self.from_log_start = from_log_start
        self.indexed = indexed or {}  # queues known to be indexed up to here (a clean stop's checkpoint)
        self.cut_from = cut_from  # after a crash: a queue's entries from here on are redone
        self.seen: set[QueueKey] = set()
        self.damaged: set[QueueKey] = set()
        self.count = 0
        self.tombstones = 0
        self.entries_dropped = 0

    def dispatch(self, rec: ScannedRecord, *, lossy: bool) -> None:
        key = (rec.topic, rec.queue_id)
        if rec.end_offset <= self.indexed.get(key, -1):
            return  # indexed before a clean stop: its queue need not even be loaded
        if key in self.damaged or not (self.every_topic or self.registry.accepts(rec.topic, rec.phys)):
            return
        try:
            cq = self.registry.queue(rec.topic, rec.queue_id)
        except Exception as exc:  # QueueDamaged, or a file that will not open
            log.warning("consume queue %s/%s is damaged (%s); it will be rebuilt", key[0], key[1], exc)
            self.damaged.add(key)
            return
        if key not in self.seen:
            self.seen.add(key)
            if self.cut_from is not None:
                self.entries_dropped += cq.truncate_phys(self.cut_from)
        if rec.queue_offset < cq.max_offset:
            return  # indexed before the crash and still valid
        if rec.queue_offset > cq.max_offset:
            if self.from_log_start and not cq.files:
                cq.max_offset = cq.min_offset = rec.queue_offset  # older records have expired
            elif lossy:
                gap = rec.queue_offset - cq.max_offset  # one tombstone stands for every lost message
                cq.append_entry(rec.phys, 0, 0, cq.max_offset, gap, rec.store_ms)
                self.tombstones += gap
            else:
                self.damaged.add(key)  # entries are missing and no damage explains it
                return
        cq.append_entry(rec.phys, rec.size, rec.tag_summary, rec.queue_offset, rec.count, rec.store_ms)
        self.count += 1


def _scan(commitlog: CommitLog, scan_from: int, report: RecoveryReport, sink: Redispatcher) -> int:
    """Scan the log from ``scan_from`` (a record boundary), re-dispatching; fix write
    positions; return the end."""
    segments = commitlog.segments
    start_index = (scan_from - segments[0].base) // commitlog.segment_bytes if segments else 0
    for i in range(start_index, len(segments)):
        segment = segments[i]
        is_last = i == len(segments) - 1
        start = scan_from - segment.base if i == start_index else 0
        state = SegmentScan(end=start)
        for item in scan_segment(segment, is_last=is_last, damage=report.damage, start=start):
            if isinstance(item, SegmentScan):
                state = item
                continue
            report.records_scanned += 1
            sink.dispatch(item, lossy=bool(report.damage) or sink.from_log_start)
        if not is_last and not state.sealed:
            # Data stopped early in a segment that has a successor (it was truncated, or zeroed):
            # whatever stood there is lost. Report it, and pad the rest so reads skip it.
            start, end = segment.base + state.end, segment.base + segment.size
            report.damage.append(Damage(start, end, "a sealed segment ends early (truncated or zeroed)"))
            segment.write_at(state.end, layout.encode_blank(segment.size - state.end)[: layout.MIN_BLANK_SIZE])
            state.end = segment.size
        segment.wrote = segment.flushed = state.end
    if not segments:
        return 0
    last = segments[-1]
    last.zero_from(last.wrote)  # erase a torn tail so that no later scan resurrects it
    if report.damage and report.damage[-1].end > last.end and report.damage[-1].start >= last.base:
        log.warning("cut a torn tail of %d bytes at log offset %d", report.damage[-1].end - last.end, last.end)
    return last.end


def recover(
    commitlog: CommitLog,
    registry: QueueRegistry,
    *,
    checkpoint_offset: int | None,
    checkpoint_queues: dict[QueueKey, tuple[int, int]],
    abnormal: bool,
    full: bool,
) -> RecoveryReport:
    """Recover the store in place and report what was cut or rebuilt (see the module docstring)."""
    report = RecoveryReport(abnormal=abnormal)
    segments = commitlog.segments
    scan_from = segments[0].base if segments else 0
    if segments and not full and checkpoint_offset is not None:
        # Everything before the checkpoint was on disk, records and entries alike: scan from it.
        scan_from = min(max(checkpoint_offset, scan_from), segments[-1].base + commitlog.segment_bytes)
    report.scanned_from = scan_from
    clean = not abnormal and not full and checkpoint_offset is not None

    indexed = {key: high for key, (_low, high) in checkpoint_queues.items()} if clean else {}
    from_log_start = not segments or scan_from == segments[0].base
    sink = Redispatcher(registry, from_log_start=from_log_start, indexed=indexed, cut_from=None if clean else scan_from)
    report.log_end = _scan(commitlog, scan_from, report, sink)
    report.queue_entries_dropped += sink.entries_dropped

    # Queues with no record in the scanned part are not even loaded: when first used they are
    # cut back to the log's end and checked (broker.store.queues). The ones loaded are checked here.
    for key, (low, high) in {} if clean else {k: v for k, v in checkpoint_queues.items() if k in sink.seen}.items():
        alive = key not in sink.damaged and registry.accepts(key[0], report.log_end)
        if alive and (registry.queue(*key).max_offset < high or registry.queue(*key).min_offset > low):
            sink.damaged.add(key)
    report.redispatched += sink.count
    report.tombstones += sink.tombstones
    if sink.damaged:
        floors = {key: high for key, (_low, high) in checkpoint_queues.items()}
        rebuild_queues(commitlog, sorted(sink.damaged), registry, floors, report)
    return report


def rebuild_queues(
    commitlog: CommitLog,
    keys: list[QueueKey],
    registry: QueueRegistry,
    checkpoint_queues: dict[QueueKey, int],
    report: RecoveryReport,
) -> None:
    """Delete the damaged queues and index them again from the start of the commit log.

    ``checkpoint_queues`` holds each queue's lowest acceptable end: a queue whose records all
    expired starts there, so its offsets are never handed out twice.
    """
    wanted = set(keys)
    for key in keys:
        registry.drop_queue(*key)
    sink = Redispatcher(registry, from_log_start=True)
    for i, segment in enumerate(commitlog.segments):
        is_last = i == len(commitlog.segments) - 1
        for item in scan_segment(segment, is_last=is_last, damage=report.damage, verify=False):
            if isinstance(item, ScannedRecord) and (item.topic, item.queue_id) in wanted:
                sink.dispatch(item, lossy=True)
    for key in keys:
        cq = registry.queue(*key)
        floor = checkpoint_queues.get(key, 0)
        if not cq.files and cq.max_offset < floor:
            cq.min_offset = cq.max_offset = floor  # every record expired: keep offsets rising
    report.redispatched += sink.count
    report.tombstones += sink.tombstones
    report.rebuilt_queues += [f"{t}/{q}" for t, q in keys]


AcceptRecord = Callable[[str, int], bool]
