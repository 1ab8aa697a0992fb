"""The message store facade: commit log + consume queues, recovered at open, with their
flusher (:mod:`broker.store.flush`), retention (:mod:`broker.store.retention`) and scrub.

The broker's event loop is the single writer: ``put`` appends records to the commit log and
their entries to the consume queue in one step, so a record is readable as soon as ``put``
returns. The flusher makes them durable (``flusher.wait_flushed`` for a sync-flush send) and
writes the checkpoint recovery starts from.

Directory layout::

    <path>/commitlog/<20-digit offset>          commit-log segments
    <path>/consumequeue/<topic>/<queueId>/...   consume-queue files
    <path>/checkpoint                           JSON: durable log offset + queue sizes
    <path>/abort                                present while the store is open
"""

from __future__ import annotations

import errno
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator

from broker.store.commitlog import CommitLog
from broker.store.consumequeue import ConsumeQueue
from broker.store.flush import Flusher, FlushTimes, read_checkpoint
from broker.store.follow import LogFollower
from broker.store.locate import Located, record_holding
from broker.store.mappedfile import Sync
from broker.store.queues import QueueSet, Registry, parse_table
from broker.store.reading import GetResult, QueueReader
from broker.store.recovery import QueueKey, RecoveryReport, rebuild_queues, recover
from broker.store.retention import Retention
from broker.store.scan import ScannedRecord, records_after
from broker.store.scrub import ScrubbedLog, Scrubber, ScrubStats
from broker.store.stats import StoreStats
from broker.store.values import PutResult, StoreConfig
from rocketspark.codec.layout import RecordCorrupted
from rocketspark.errors import StoreWriteError

log = logging.getLogger(__name__)


class MessageStore:
    """See the module docstring. ``accepts(topic, phys)`` tells recovery which records to index;
    ``sync`` forces the log's and the queues' files to disk (``os.fsync``; a test's disk may
    fail or stall it)."""

    def __init__(
        self,
        config: StoreConfig,
        accepts: Callable[[str, int], bool] | None = None,
        *,
        sync: Sync = os.fsync,
        on_flush: Callable[[float], None] | None = None,
    ) -> None:
        """``on_flush`` is told each log flush's seconds (the metrics' latency histogram)."""
        self.config = config
        self.path = config.path
        self.commitlog = CommitLog(self.path / "commitlog", config.segment_bytes, sync=sync)
        self.queues = QueueSet(
            self.path / "consumequeue", config.queue_entries_per_file, self.commitlog, rebuild=self._rebuild, sync=sync
        )
        self.stats = StoreStats() if on_flush is None else StoreStats(on_flush=on_flush)
        self._append_lock = threading.Lock()  # makes (log end, queue sizes) snapshots consistent
        self._maint_lock = threading.Lock()  # flusher vs. retention and deletes
        self._registry = Registry(self.queues, accepts or (lambda topic, phys: True), self._maint_lock)
        self.flusher = Flusher(
            self.commitlog,
            self.queues,
            self.stats,
            FlushTimes(config.flush_interval_ms, config.sync_flush_timeout_ms, config.checkpoint_interval_ms),
            checkpoint=self.path / "checkpoint",
            append_lock=self._append_lock,
            maint_lock=self._maint_lock,
            whole_end=self._whole_end,
        )
        self.retention = Retention(
            self.commitlog, self.queues, self.stats, retention_ms=config.retention_ms, maint_lock=self._maint_lock
        )
        self.cut = (0, 0)  # (how many times, where) the log was cut back: readers behind it follow
        self.reader = QueueReader(self.commitlog, self.stats, self._rebuild_queue)
        self.follower: LogFollower | None = None  # set once this store copies a master's log
        scrubbed = ScrubbedLog(self.commitlog, self._append_lock, self._maint_lock, lambda: self.flushed_offset)
        self.scrub = Scrubber(
            scrubbed.segments,
            scrubbed.repair,
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
            self._registry,
            checkpoint_offset=None if checkpoint is None else int(checkpoint["log"]),
            checkpoint_queues=saved,
            abnormal=abnormal,
            full=full_verify or (abnormal and checkpoint is None) or bool(self.commitlog.short_segments),
        )
        self.queues.saved = {key: bounds for key, bounds in saved.items() if key not in self.queues.loaded}
        for cq in self.queues:
            cq.delete_expired(self.commitlog.min_offset)
        abort.write_bytes(b"")
        self.flusher.flushed_offset = self.commitlog.max_offset
        self.flusher.write_checkpoint(force=True)
        self.flusher.start()
        if self.config.scrub_bytes_per_s > 0:
            self.scrub.start()
        return report

    def close(self) -> None:
        """Flush everything, write the checkpoint and mark the stop as clean."""
        self.scrub.stop()
        self.flusher.stop()
        with self._maint_lock:
            self.flusher.flush_all()
            self.flusher.write_checkpoint(force=True)
            for cq in self.queues:
                cq.close_files()
            self.commitlog.close()
        (self.path / "abort").unlink(missing_ok=True)

    # -- the queues' upkeep ---------------------------------------------------------------------

    def _rebuild_queue(self, topic: str, queue_id: int) -> None:
        """Index one queue again from the whole commit log; its offsets never go back."""
        cq = self.queues.loaded.get((topic, queue_id))
        self._rebuild((topic, queue_id), cq.max_offset if cq is not None else 0)

    def _rebuild(self, key: QueueKey, floor: int) -> None:
        report = RecoveryReport()
        rebuild_queues(self.commitlog, [key], self._registry, {key: floor}, report)
        self.queues.raw(*key).delete_expired(self.commitlog.min_offset)
        self.reader.rebuilt_at[key] = time.monotonic()
        self.stats.queues_rebuilt += 1
        for line in report.lines()[1:]:
            log.warning("%s", line)

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
                cq.append_entry(phys, len(record), tag_summary, first, count, store_ms)
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
                self.follower = LogFollower(self.commitlog, self._registry)
            self.follower.append(offset, chunk)

    def index_copied(self) -> int:
        """Index every whole record copied so far; return how many. Raises ``RecordCorrupted``
        for a damaged one (the log is cut back before it: it must be copied again)."""
        try:
            with self._append_lock:
                count = self.follower.index() if self.follower is not None else 0
        except RecordCorrupted:
            self.flusher.flushed_offset = min(self.flusher.flushed_offset, self.commitlog.max_offset)
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
            self.flusher.flushed_offset = min(self.flusher.flushed_offset, offset)
            self.cut = (self.cut[0] + 1, offset)
        self.flusher.write_checkpoint(force=True)

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
        return records_after(list(self.commitlog.segments), max(offset, self.commitlog.min_offset))

    @property
    def flushed_offset(self) -> int:
        """The log is durable up to here."""
        return self.flusher.flushed_offset

    @property
    def indexable_end(self) -> int:
        """The end of the log that is durable and whole: flushed, and on a slave also parsed
        (its copy may end in the middle of a record)."""
        follower = self.follower
        return self.flushed_offset if follower is None else min(self.flushed_offset, follower.indexed)

    def _whole_end(self) -> int:
        """Where the log ends whole and indexed (asked under the append lock): a slave's copy
        may end in records not indexed yet, or in the middle of one."""
        return self.commitlog.max_offset if self.follower is None else self.follower.indexed

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
        return self.reader.get(cq, offset, max_messages, max_bytes, tag_hashes, end_offset)

    def min_offset(self, topic: str, queue_id: int) -> int:
        cq = self.queues.find(topic, queue_id)
        return cq.min_offset if cq else 0

    def max_offset(self, topic: str, queue_id: int) -> int:
        cq = self.queues.find(topic, queue_id)
        return cq.max_offset if cq else 0

    def has_record(self, topic: str, queue_id: int, phys: int) -> bool:
        """Whether the queue indexes a batch record at log offset ``phys``."""
        cq = self.queues.find(topic, queue_id)
        return cq is not None and cq.indexes(phys)

    def record_holding(self, physical: int) -> Located | None:
        """The record holding the message at ``physical`` (an offset id's position), and the
        message's place in it (:mod:`broker.store.locate`)."""
        return record_holding(
            self, physical, segment_bytes=self.config.segment_bytes, max_record_bytes=self.config.max_record_bytes
        )

    def last_store_ms(self, topic: str, queue_id: int) -> int:
        """When the newest message of the queue was stored (0 for an empty queue)."""
        cq = self.queues.find(topic, queue_id)
        return 0 if cq is None else cq.last_store_ms()

    def offset_for_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """The first queue offset stored at or after ``timestamp_ms`` (max offset if none);
        a batch's messages share its store time."""
        cq = self.queues.find(topic, queue_id)
        return 0 if cq is None else cq.offset_for_time(timestamp_ms)

    # -- retention ---------------------------------------------------------------------------

    def delete_expired(self, now: float | None = None, *, blocking: bool = True) -> int:
        """Apply retention (:meth:`broker.store.retention.Retention.delete_expired`)."""
        return self.retention.delete_expired(now, blocking=blocking)

    def disk_usage(self) -> int:
        return self.commitlog.disk_usage() + sum(cq.disk_usage() for cq in self.queues)


def _remedy(exc: OSError) -> str:
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return "Free disk space on the broker's data_dir file system"
    if exc.errno in (errno.EMFILE, errno.ENFILE):
        return "Raise the broker's open-file limit (ulimit -n)"
    return "Check the broker's disk and its kernel log for I/O errors"
