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
import logging
import shutil
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from broker.store.commitlog import CommitLog
from broker.store.consumequeue import ENTRY, ConsumeQueue
from broker.store.metafile import read_json, write_json_atomic
from broker.store.recovery import QueueKey, RecoveryReport, recover

log = logging.getLogger(__name__)

MAX_FILTER_SCAN = 16_000  # entries a filtered pull may skip before it answers (RocketMQ's cap)


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
    body: bytes  # the records, concatenated as stored
    count: int
    next_offset: int
    min_offset: int
    max_offset: int


@dataclass(frozen=True, slots=True)
class PutResult:
    first_queue_offset: int
    first_offset: int  # commit-log offset of the first record
    end_offset: int  # commit-log offset just past the last record
    count: int
    store_ms: int


@dataclass
class StoreStats:
    messages_put: int = 0
    bytes_put: int = 0
    messages_got: int = 0
    segments_deleted: int = 0


@dataclass
class _Waiter:
    offset: int
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[bool] = field(repr=False)


class MessageStore:
    """See the module docstring. ``accepts(topic, phys)`` tells recovery which records to index."""

    def __init__(self, config: StoreConfig, accepts: Callable[[str, int], bool] | None = None) -> None:
        self.config = config
        self.path = config.path
        self.commitlog = CommitLog(self.path / "commitlog", config.segment_bytes)
        self.queues: dict[QueueKey, ConsumeQueue] = {}
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
        self._checkpointed: tuple[int, dict[str, int]] | None = None
        self.flushed_offset = 0

    # -- lifecycle ---------------------------------------------------------------------------

    def open(self, *, full_verify: bool = False) -> RecoveryReport:
        """Load and recover the store, then start the flusher thread."""
        self.path.mkdir(parents=True, exist_ok=True)
        abort = self.path / "abort"
        abnormal = abort.exists()
        checkpoint = read_json(self.path / "checkpoint", default=None)
        self.commitlog.load()
        report = recover(
            self.commitlog,
            self,
            self._existing_queue_keys(),
            checkpoint_offset=None if checkpoint is None else int(checkpoint["log"]),
            checkpoint_queues=_parse_queue_table(checkpoint),
            abnormal=abnormal,
            full=full_verify or (abnormal and checkpoint is None),
        )
        for cq in self.queues.values():
            cq.delete_expired(self.commitlog.min_offset)
        abort.write_bytes(b"")
        self.flushed_offset = self.commitlog.max_offset
        self._write_checkpoint(force=True)
        self._flusher = threading.Thread(target=self._flush_loop, name="store-flusher", daemon=True)
        self._flusher.start()
        return report

    def close(self) -> None:
        """Flush everything, write the checkpoint and mark the stop as clean."""
        self._stop.set()
        self._wake.set()
        if self._flusher is not None:
            self._flusher.join()
            self._flusher = None
        with self._maint_lock:
            self._flush_all()
            self._write_checkpoint(force=True)
            for cq in self.queues.values():
                cq.close_files()
            self.commitlog.close()
        (self.path / "abort").unlink(missing_ok=True)

    # -- queue registry (also used by recovery) -------------------------------------------

    def _queue_dir(self, topic: str, queue_id: int) -> Path:
        return self.path / "consumequeue" / topic / str(queue_id)

    def _existing_queue_keys(self) -> list[QueueKey]:
        root = self.path / "consumequeue"
        if not root.exists():
            return []
        keys = []
        for topic_dir in sorted(root.iterdir()):
            for q in sorted(topic_dir.iterdir()) if topic_dir.is_dir() else []:
                if q.name.isdigit():
                    keys.append((topic_dir.name, int(q.name)))
        return keys

    def queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        key = (topic, queue_id)
        cq = self.queues.get(key)
        if cq is None:
            cq = ConsumeQueue(self._queue_dir(topic, queue_id), topic, queue_id, self.config.queue_entries_per_file)
            cq.load()
            self.queues[key] = cq
        return cq

    def drop_queue(self, topic: str, queue_id: int) -> None:
        with self._maint_lock:
            cq = self.queues.pop((topic, queue_id), None)
            if cq is None:
                cq = ConsumeQueue(self._queue_dir(topic, queue_id), topic, queue_id, self.config.queue_entries_per_file)
            cq.destroy()

    def accepts(self, topic: str, phys: int) -> bool:
        return self._accepts(topic, phys)

    def drop_topic(self, topic: str) -> None:
        """Forget a deleted topic's queues. Its records stay in the log until retention."""
        for key in [k for k in self.queues if k[0] == topic]:
            self.drop_queue(*key)
        shutil.rmtree(self.path / "consumequeue" / topic, ignore_errors=True)

    # -- write -------------------------------------------------------------------------------

    def put(
        self, topic: str, queue_id: int, born_ms: int, payloads: Sequence[bytes], tag_hashes: Sequence[int]
    ) -> PutResult:
        """Append messages (record payloads, born together) to one queue; readable on return."""
        cq = self.queues.get((topic, queue_id)) or self.queue(topic, queue_id)
        store_ms = int(time.time() * 1000)
        with self._append_lock:
            first = cq.max_offset
            appended = self.commitlog.append_messages(
                topic.encode(), queue_id, first, store_ms, born_ms, payloads, tag_hashes
            )
            cq.append(appended.entries)
        self.stats.messages_put += appended.count
        self.stats.bytes_put += appended.nbytes
        return PutResult(first, appended.first_offset, appended.end_offset, appended.count, store_ms)

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
        cq = self.queues.get((topic, queue_id))
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
        return self._read_range(cq, offset, max_messages, max_bytes, tag_hashes, stop)

    def _read_range(
        self,
        cq: ConsumeQueue,
        offset: int,
        max_messages: int,
        max_bytes: int,
        tag_hashes: frozenset[int] | None,
        stop: int,
    ) -> GetResult:
        read = self.commitlog.read
        log_min = self.commitlog.min_offset
        parts: list[bytes] = []
        run_start = run_end = -1
        found = nbytes = 0
        cursor = offset
        scan_budget = max(max_messages, MAX_FILTER_SCAN) if tag_hashes is not None else max_messages
        done = False
        while not done and cursor < stop and scan_budget > 0 and found < max_messages:
            wanted = min(scan_budget, max_messages - found if tag_hashes is None else scan_budget, stop - cursor)
            chunk = cq.read(cursor, wanted)
            if not chunk:
                break
            for phys, size, tag in ENTRY.iter_unpack(chunk):
                if size == 0 or phys < log_min or (tag_hashes is not None and tag not in tag_hashes):
                    cursor += 1
                    scan_budget -= 1
                    continue  # a tombstone, an expired record, or filtered out
                if found and nbytes + size > max_bytes:
                    done = True
                    break
                cursor += 1
                scan_budget -= 1
                if phys == run_end and (phys % self.commitlog.segment_bytes) != 0:
                    run_end += size
                else:
                    if run_end > run_start:
                        parts.append(read(run_start, run_end - run_start) or b"")
                    run_start, run_end = phys, phys + size
                found += 1
                nbytes += size
                if found >= max_messages:
                    done = True
                    break
        if run_end > run_start:
            parts.append(read(run_start, run_end - run_start) or b"")
        self.stats.messages_got += found
        status = GetStatus.FOUND if found else GetStatus.NO_MATCHED_MESSAGE
        return GetResult(status, b"".join(parts), found, cursor, cq.min_offset, cq.max_offset)

    def min_offset(self, topic: str, queue_id: int) -> int:
        cq = self.queues.get((topic, queue_id))
        return cq.min_offset if cq else 0

    def max_offset(self, topic: str, queue_id: int) -> int:
        cq = self.queues.get((topic, queue_id))
        return cq.max_offset if cq else 0

    def offset_for_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """The first queue offset stored at or after ``timestamp_ms`` (max offset if none)."""
        cq = self.queues.get((topic, queue_id))
        if cq is None:
            return 0
        lo, hi = cq.min_offset, cq.max_offset
        while lo < hi:
            mid = (lo + hi) // 2
            stored = self.commitlog.store_time_at(cq.entry(mid)[0])
            if stored is not None and stored < timestamp_ms:
                lo = mid + 1
            else:
                hi = mid
        return lo

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
        self.commitlog.flush()
        self.flushed_offset = max(self.flushed_offset, end)
        self._release_waiters()
        for cq in list(self.queues.values()):
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
            end = self.commitlog.max_offset
            queues = {f"{t}@{q}": cq.max_offset for (t, q), cq in self.queues.items() if cq.max_offset}
        if not force and self._checkpointed == (end, queues):
            return
        for cq in list(self.queues.values()):
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
            deleted = self.commitlog.delete_expired(cutoff)
            if deleted:
                log_min = self.commitlog.min_offset
                for cq in self.queues.values():
                    cq.delete_expired(log_min)
        finally:
            self._maint_lock.release()
        for path in deleted:
            log.info("retention deleted commit-log segment %s", path.name)
        self.stats.segments_deleted += len(deleted)
        return len(deleted)

    def disk_usage(self) -> int:
        return self.commitlog.disk_usage() + sum(cq.disk_usage() for cq in self.queues.values())


def _resolve(future: asyncio.Future[bool]) -> None:
    if not future.done():
        future.set_result(True)


def _parse_queue_table(checkpoint: dict[str, object] | None) -> dict[QueueKey, int]:
    if not checkpoint:
        return {}
    table = checkpoint.get("queues", {})
    out: dict[QueueKey, int] = {}
    if isinstance(table, dict):
        for key, value in table.items():
            topic, _, qid = str(key).rpartition("@")
            if topic and qid.isdigit() and isinstance(value, int):
                out[(topic, int(qid))] = value
    return out
