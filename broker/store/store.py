"""The message store facade: commit log + consume queues + flushing + retention + recovery.

The broker's event loop is the single writer: ``put`` appends records to the commit log and
their entries to the consume queue in one step, so a record is readable as soon as ``put``
returns. A flusher thread makes data durable: every ``flush_interval_ms`` (async mode), or
as soon as a sender waits for it (sync mode, group commit), and writes a checkpoint that
recovery starts from.

Directory layout::

    <path>/commitlog/<20-digit offset>          commit-log segments
    <path>/consumequeue/<topic>/<queueId>/...   consume-queue files
    <path>/checkpoint                           JSON: durable log offset + queue sizes
    <path>/abort                                present while the store is open
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import msgspec

from broker.store.commitlog import CommitLog
from broker.store.consumequeue import ENTRY, ConsumeQueue
from broker.store.follow import LogFollower
from broker.store.locate import Located, record_holding
from broker.store.mappedfile import Sync
from broker.store.metafile import read_json, write_json_atomic
from broker.store.queues import QueueSet, parse_table
from broker.store.reading import GetResult, GetStatus, QueueReader
from broker.store.recovery import QueueKey, RecoveryReport, rebuild_queues, recover
from broker.store.scan import Damage, ScannedRecord, scan_segment
from broker.store.scrub import Scrubber, ScrubStats
from broker.store.stats import StoreStats
from rocketspark.codec.layout import RecordCorrupted
from rocketspark.errors import StoreWriteError

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class StoreConfig:
    path: Path
    segment_bytes: int = 128 * 1024 * 1024  # commit-log segment size
    queue_entries_per_file: int = 300_000  # consume-queue entries per file (RocketMQ default)
    flush_mode: str = "async"  # "async": flush every interval; "sync": ack after fsync
    flush_interval_ms: int = 500
    sync_flush_timeout_ms: int = 5000
    retention_ms: int = 72 * 3600 * 1000  # sealed segments older than this are deleted
    checkpoint_interval_ms: int = 1000
    scrub_bytes_per_s: int = 4 * 1024 * 1024  # background CRC check of sealed segments; 0: off
    scrub_pause_ms: int = 60_000  # between two passes over every sealed segment
    max_record_bytes: int = 8 * 1024 * 1024  # a larger size field in a record header is damage


@dataclass(frozen=True, slots=True)
class PutResult:
    first_queue_offset: int
    first_offset: int  # commit-log offset of the first record
    end_offset: int  # commit-log offset just past the last record
    count: int
    store_ms: int


@dataclass
class _Waiter:
    offset: int
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[bool] = field(repr=False)


class MessageStore:
    """See the module docstring. ``accepts(topic, phys)`` tells recovery which records to index;
    ``sync`` forces the log's and the queues' files to disk (``os.fsync``; a test's disk may
    fail or stall it)."""

    def __init__(
        self, config: StoreConfig, accepts: Callable[[str, int], bool] | None = None, *, sync: Sync = os.fsync
    ) -> None:
        self.config = config
        self.path = config.path
        self.commitlog = CommitLog(self.path / "commitlog", config.segment_bytes, sync=sync)
        self.queues = QueueSet(self.path / "consumequeue", config.queue_entries_per_file, self.commitlog, sync=sync)
        self.queues.rebuild = self._rebuild
        self.stats = StoreStats()
        self._accepts = accepts or (lambda topic, phys: True)
        self._append_lock = threading.Lock()  # makes (log end, queue sizes) snapshots consistent
        self._maint_lock = threading.Lock()  # flusher vs. retention and deletes
        self._waiters: list[_Waiter] = []
        self._waiters_lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._flusher: threading.Thread | None = None
        self._last_checkpoint = 0.0
        self._checkpointed: tuple[int, dict[str, list[int]]] | None = None
        self.flushed_offset = 0
        self.cut = (0, 0)  # (how many times, where) the log was cut back: readers behind it follow
        self.reader = QueueReader(self.commitlog, self.stats, self.rebuild_queue)
        self.follower: LogFollower | None = None  # set once this store copies a master's log
        self.scrub = Scrubber(
            self._scrub_targets,
            self._mark_damage,
            config.scrub_bytes_per_s,
            max_record_bytes=config.max_record_bytes,
            idle_s=config.scrub_pause_ms / 1000,
        )

    # -- lifecycle ---------------------------------------------------------------------------

    def open(self, *, full_verify: bool = False) -> RecoveryReport:
        """Load and recover the store, then start the flusher thread."""
        self.path.mkdir(parents=True, exist_ok=True)
        abort = self.path / "abort"
        abnormal = abort.exists()
        checkpoint = read_checkpoint(self.path / "checkpoint")
        self.commitlog.load()
        saved = parse_table(checkpoint)
        self.queues.scan_disk()
        report = recover(
            self.commitlog,
            self,
            checkpoint_offset=None if checkpoint is None else int(checkpoint["log"]),
            checkpoint_queues=saved,
            abnormal=abnormal,
            full=full_verify or (abnormal and checkpoint is None) or bool(self.commitlog.short_segments),
        )
        self.queues.saved = {key: bounds for key, bounds in saved.items() if key not in self.queues.loaded}
        for cq in self.queues:
            cq.delete_expired(self.commitlog.min_offset)
        abort.write_bytes(b"")
        self.flushed_offset = self.commitlog.max_offset
        self._write_checkpoint(force=True)
        self._flusher = threading.Thread(target=self._flush_loop, name="store-flusher", daemon=True)
        self._flusher.start()
        if self.config.scrub_bytes_per_s > 0:
            self.scrub.start()
        return report

    def close(self) -> None:
        """Flush everything, write the checkpoint and mark the stop as clean."""
        self._stop.set()
        self._wake.set()
        self.scrub.stop()
        if self._flusher is not None:
            self._flusher.join()
            self._flusher = None
        with self._maint_lock:
            self._flush_all()
            self._write_checkpoint(force=True)
            for cq in self.queues:
                cq.close_files()
            self.commitlog.close()
        (self.path / "abort").unlink(missing_ok=True)

    # -- queue registry (also used by recovery) -------------------------------------------

    def queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        """Load (as it lies on disk) or create a queue; recovery's view of the queues."""
        return self.queues.raw(topic, queue_id)

    def rebuild_queue(self, topic: str, queue_id: int) -> None:
        """Index one queue again from the whole commit log; its offsets never go back."""
        cq = self.queues.loaded.get((topic, queue_id))
        self._rebuild((topic, queue_id), cq.max_offset if cq is not None else 0)

    def _rebuild(self, key: QueueKey, floor: int) -> None:
        report = RecoveryReport()
        rebuild_queues(self.commitlog, [key], self, {key: floor}, report)
        self.queues.raw(*key).delete_expired(self.commitlog.min_offset)
        self.reader.rebuilt_at[key] = time.monotonic()
        self.stats.queues_rebuilt += 1
        for line in report.lines()[1:]:
            log.warning("%s", line)

    def _scrub_targets(self) -> list[tuple[Path, int, int]]:
        """(path, base, bytes to check) of every segment: all of a sealed one, what is flushed
        of the open one."""
        with self._append_lock:
            segments = list(self.commitlog.segments)
        if not segments:
            return []
        sealed = [(s.path, s.base, s.size) for s in segments[:-1]]
        last = segments[-1]
        return [*sealed, (last.path, last.base, max(0, min(self.flushed_offset, last.end) - last.base))]

    def _mark_damage(self, base: int) -> list[str]:
        """Scan a damaged sealed segment as recovery does, cutting its damaged ranges out as
        gaps (the scrub calls this from its thread; retention waits meanwhile)."""
        with self._maint_lock:
            segment = self.commitlog.segment_for(base)
            if segment is None:
                return []
            damage: list[Damage] = []
            if segment is self.commitlog.segments[-1]:
                return []  # never cut the open segment under its writer: reported, found again
            for _ in scan_segment(segment, is_last=False, damage=damage):
                pass
        return [str(d) for d in damage]

    def drop_queue(self, topic: str, queue_id: int) -> None:
        with self._maint_lock:
            self.queues.drop((topic, queue_id))

    def accepts(self, topic: str, phys: int) -> bool:
        return self._accepts(topic, phys)

    def drop_topic(self, topic: str) -> None:
        """Forget a deleted topic's queues. Its records stay in the log until retention."""
        with self._maint_lock:
            self.queues.drop_topic(topic)
        self.stats.forget(topic)

    # -- write -------------------------------------------------------------------------------

    def put(self, topic: str, queue_id: int, record: bytes, count: int, tag_summary: int) -> PutResult:
        """Append one batch record (checked by the caller, ``codec.ingest``) of ``count``
        messages to one queue; readable on return."""
        cq = self.queues.queue(topic, queue_id)
        store_ms = int(time.time() * 1000)
        with self._append_lock:
            first = cq.max_offset
            log_end = self.commitlog.max_offset
            try:
                phys = self.commitlog.append_batch(record, queue_id, first, store_ms)
                cq.append(ENTRY.pack(phys, len(record), tag_summary, first, count, store_ms), first + count)
            except OSError as exc:
                self._undo_put(cq, first, log_end)
                raise StoreWriteError(
                    f"broker store at {self.path} could not write {count} message(s) to {topic}/{queue_id}: "
                    f"{exc.strerror or exc}; nothing of this send was stored. {_remedy(exc)}; writes resume by "
                    "themselves once it is fixed, and reads go on meanwhile"
                ) from exc
        self.stats.stored(topic, count, len(record))
        return PutResult(first, phys, phys + len(record), count, store_ms)

    def append_copied(self, offset: int, chunk: bytes) -> None:
        """A slave appends a chunk of its master's log at ``offset``; ``index_copied`` makes
        its records readable (see :mod:`broker.store.follow`)."""
        with self._append_lock:
            if self.follower is None:
                self.follower = LogFollower(self.commitlog, self)
            self.follower.append(offset, chunk)

    def index_copied(self) -> int:
        """Index every whole record copied so far; return how many. Raises ``RecordCorrupted``
        for a damaged one (the log is cut back before it: it must be copied again)."""
        try:
            with self._append_lock:
                count = self.follower.index() if self.follower is not None else 0
        except RecordCorrupted:
            self.flushed_offset = min(self.flushed_offset, self.commitlog.max_offset)
            raise
        self.stats.messages_copied += count
        return count

    def stop_copying(self) -> None:
        """This replica takes office: index all it copied and cut a record the old master
        never finished sending (it could never be completed, and new records go after it);
        from now on it writes its own records."""
        if self.follower is None:
            return
        try:
            self.index_copied()
        finally:
            indexed, self.follower = self.follower.indexed, None
            if indexed < self.commitlog.max_offset:
                log.warning(
                    "cut %d bytes of a record copied in part at log offset %d", self.log_max_offset - indexed, indexed
                )
                self.truncate_log(indexed)

    def truncate_log(self, offset: int) -> None:
        """Cut the log, and every entry pointing into what is cut, at ``offset`` (a replica
        rejoining its group drops what the group never had). Queues not loaded yet are cut
        when first used."""
        with self._maint_lock, self._append_lock:
            self.commitlog.truncate(offset)
            for cq in self.queues:
                cq.truncate_phys(offset)
            self.queues.saved.clear()  # what the checkpoint saw of them no longer holds
            if self.follower is not None:
                self.follower.indexed = min(self.follower.indexed, offset)
            self.flushed_offset = min(self.flushed_offset, offset)
            self.cut = (self.cut[0] + 1, offset)
        self._write_checkpoint(force=True)

    # -- the log as a whole (what the broker around the store asks of it) -------------------------

    @property
    def log_min_offset(self) -> int:
        return self.commitlog.min_offset

    @property
    def log_max_offset(self) -> int:
        """The log's end: where the next record goes."""
        return self.commitlog.max_offset

    @property
    def log_segments(self) -> int:
        return len(self.commitlog.segments)

    @property
    def scrub_stats(self) -> ScrubStats:
        return self.scrub.stats

    def queue_keys_on_disk(self) -> list[QueueKey]:
        """Every queue with files on disk (scanned now)."""
        return self.queues.scan_disk()

    def known_queues(self) -> list[QueueKey]:
        """Every queue loaded or found on disk."""
        return [*self.queues.loaded, *self.queues.on_disk]

    def records_after(self, offset: int) -> Iterator[ScannedRecord]:
        """The header of every record from log offset ``offset`` (a record boundary, or before
        the log's start) to the end, in log order (replaying idempotent producers)."""
        offset = max(offset, self.commitlog.min_offset)
        segments = list(self.commitlog.segments)
        for i, segment in enumerate(segments):
            if segment.end <= offset:
                continue
            start = max(0, offset - segment.base)
            for item in scan_segment(segment, is_last=i == len(segments) - 1, damage=[], verify=False, start=start):
                if isinstance(item, ScannedRecord) and item.phys < segment.base + segment.wrote:
                    yield item

    @property
    def indexable_end(self) -> int:
        """The end of the log that is durable and whole: flushed, and on a slave also parsed
        (its copy may end in the middle of a record)."""
        follower = self.follower
        return self.flushed_offset if follower is None else min(self.flushed_offset, follower.indexed)

    def segment_end(self, offset: int) -> int | None:
        """Where the segment holding log offset ``offset`` ends (None: no such segment now)."""
        segment = self.commitlog.segment_for(offset)
        return None if segment is None else segment.base + segment.size

    def read_record(self, phys: int, size: int) -> bytes | None:
        """The ``size`` bytes at log offset ``phys``; None when retention deleted them."""
        return self.commitlog.read(phys, size)

    def read_chunk(self, offset: int, max_bytes: int) -> bytes:
        """Up to ``max_bytes`` of the log from ``offset`` within one segment, for a slave."""
        return self.commitlog.read_chunk(offset, max_bytes)

    def _undo_put(self, cq: ConsumeQueue, first: int, log_end: int) -> None:
        """Take back a put that failed half-way, so that no record of it stays in the log
        without its entry (its queue offsets are handed out again by the next put)."""
        try:
            cq.truncate_offset(first)
            self.commitlog.truncate(log_end)
        except OSError:
            log.exception("could not take back a failed write at log offset %d", log_end)

    async def wait_flushed(self, offset: int) -> bool:
        """Sync flush: wait until the log is durable up to ``offset``; False on timeout."""
        if self.flushed_offset >= offset:
            return True
        loop = asyncio.get_running_loop()
        waiter = _Waiter(offset, loop, loop.create_future())
        with self._waiters_lock:
            self._waiters.append(waiter)
        self._wake.set()
        try:
            return await asyncio.wait_for(waiter.future, self.config.sync_flush_timeout_ms / 1000)
        except TimeoutError:
            return False

    # -- read --------------------------------------------------------------------------------

    def get(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        *,
        max_messages: int,
        max_bytes: int,
        tag_hashes: frozenset[int] | None = None,
        end_offset: int | None = None,
    ) -> GetResult:
        """Read up to ``max_messages`` / ``max_bytes`` of records from ``offset`` (at least one),
        never at or past ``end_offset`` (a reader's planned end, so a filtered scan stops there)."""
        cq = self.queues.find(topic, queue_id)
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
        return self.reader.read_range(cq, offset, max_messages, max_bytes, tag_hashes, stop)

    def min_offset(self, topic: str, queue_id: int) -> int:
        cq = self.queues.find(topic, queue_id)
        return cq.min_offset if cq else 0

    def max_offset(self, topic: str, queue_id: int) -> int:
        cq = self.queues.find(topic, queue_id)
        return cq.max_offset if cq else 0

    def has_record(self, topic: str, queue_id: int, phys: int) -> bool:
        """Whether the queue indexes a batch record at log offset ``phys``."""
        cq = self.queues.find(topic, queue_id)
        if cq is None:
            return False
        slot = cq.first_slot_at_or_after(phys)
        return slot < cq.max_slot and cq.entry(slot).phys == phys

    def record_holding(self, physical: int) -> Located | None:
        """The record holding the message at ``physical`` (an offset id's position), and the
        message's place in it (:mod:`broker.store.locate`)."""
        return record_holding(
            self, physical, segment_bytes=self.config.segment_bytes, max_record_bytes=self.config.max_record_bytes
        )

    def last_store_ms(self, topic: str, queue_id: int) -> int:
        """When the newest message of the queue was stored (0 for an empty queue)."""
        cq = self.queues.find(topic, queue_id)
        if cq is None or cq.max_slot <= cq.min_slot:
            return 0
        return cq.entry(cq.max_slot - 1).store_ms

    def offset_for_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """The first queue offset stored at or after ``timestamp_ms`` (max offset if none);
        a batch's messages share its store time."""
        cq = self.queues.find(topic, queue_id)
        if cq is None:
            return 0
        lo, hi = cq.min_slot, cq.max_slot
        while lo < hi:
            mid = (lo + hi) // 2
            if cq.entry(mid).store_ms < timestamp_ms:
                lo = mid + 1
            else:
                hi = mid
        return cq.entry(lo).base if lo < cq.max_slot else cq.max_offset

    # -- flushing, checkpoint, retention ---------------------------------------------------------

    def _flush_loop(self) -> None:
        interval = self.config.flush_interval_ms / 1000
        while not self._stop.is_set():
            self._wake.wait(interval)
            self._wake.clear()
            if self._stop.is_set():
                break
            try:
                with self._maint_lock:
                    self._flush_all()
                    self._write_checkpoint()
            except Exception:
                log.exception("store flush failed; will retry")

    def _flush_all(self) -> None:
        with self._append_lock:
            end = self.commitlog.max_offset
        started = time.perf_counter()
        self.commitlog.flush()
        if end > self.flushed_offset:  # an idle store's rounds are not flushes worth a sample
            self.stats.on_flush(time.perf_counter() - started)
        self.flushed_offset = max(self.flushed_offset, end)
        self._release_waiters()
        for cq in self.queues:
            cq.flush()

    def _release_waiters(self) -> None:
        with self._waiters_lock:
            ready = [w for w in self._waiters if w.offset <= self.flushed_offset]
            self._waiters = [w for w in self._waiters if w.offset > self.flushed_offset]
        for w in ready:
            w.loop.call_soon_threadsafe(_resolve, w.future)

    def _write_checkpoint(self, *, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last_checkpoint < self.config.checkpoint_interval_ms / 1000:
            return
        with self._append_lock:
            # Everything before the checkpoint is whole and indexed: a slave's copy may end
            # in records not indexed yet, or in the middle of one.
            end = self.commitlog.max_offset if self.follower is None else self.follower.indexed
            queues = self.queues.table()
        if not force and self._checkpointed == (end, queues):
            return
        for cq in self.queues:
            cq.flush()
        write_json_atomic(self.path / "checkpoint", {"log": min(end, self.flushed_offset), "queues": queues})
        self._checkpointed = (end, queues)
        self._last_checkpoint = now

    def delete_expired(self, now: float | None = None, *, blocking: bool = True) -> int:
        """Apply retention: delete sealed log segments older than ``retention_ms``.

        It runs on the event loop (it changes what reads see). The broker's periodic round
        passes ``blocking=False`` so it never waits for the flusher's fsync: when a flush is
        under way the round is skipped (0 deleted) and the next one does the work.
        """
        cutoff = (time.time() if now is None else now) - self.config.retention_ms / 1000
        if not self._maint_lock.acquire(blocking=blocking):
            return 0
        try:
            deleted = self._delete_segments(cutoff, None)
        finally:
            self._maint_lock.release()
        for path in deleted:
            log.info("retention deleted commit-log segment %s", path.name)
        self.stats.segments_deleted_for_age += len(deleted)
        return len(deleted)

    def delete_oldest_segment(self, *, blocking: bool = True) -> Path | None:
        """Delete the oldest sealed segment whatever its age (the disk is filling up); None
        when only the segment being written is left (or, not ``blocking``, a flush is under way)."""
        if not self._maint_lock.acquire(blocking=blocking):
            return None
        try:
            deleted = self._delete_segments(float("inf"), 1)
        finally:
            self._maint_lock.release()
        self.stats.segments_deleted_for_space += len(deleted)
        return deleted[0] if deleted else None

    def _delete_segments(self, older_than: float, limit: int | None) -> list[Path]:
        deleted = self.commitlog.delete_expired(older_than, limit=limit)
        if deleted:
            log_min = self.commitlog.min_offset
            for cq in self.queues:
                cq.delete_expired(log_min)
        return deleted

    def disk_usage(self) -> int:
        return self.commitlog.disk_usage() + sum(cq.disk_usage() for cq in self.queues)


class CheckpointFile(msgspec.Struct, frozen=True):
    """``checkpoint``: the durable log offset and each queue's [min, max] (older: max only)."""

    log: Annotated[int, msgspec.Meta(ge=0)]
    queues: dict[str, int | list[int]] = {}


def read_checkpoint(path: Path) -> dict[str, Any] | None:
    value: dict[str, Any] | None = read_json(path, default=None, shape=CheckpointFile)
    return value


def _remedy(exc: OSError) -> str:
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return "Free disk space on the broker's data_dir file system"
    if exc.errno in (errno.EMFILE, errno.ENFILE):
        return "Raise the broker's open-file limit (ulimit -n)"
    return "Check the broker's disk and its kernel log for I/O errors"


def _resolve(future: asyncio.Future[bool]) -> None:
    if not future.done():
        future.set_result(True)
