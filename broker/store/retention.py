"""Retention: sealed commit-log segments deleted for their age, or, oldest first, for space.

A deleted segment's entries are forgotten by every consume queue at once, so readers see
``OFFSET_TOO_SMALL`` rather than a hole. It runs on the event loop (it changes what reads
see) and holds the store's ``maint_lock``, so never under a flush: the broker's periodic
rounds pass ``blocking=False`` and skip a round while the flusher fsyncs, rather than wait.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

from broker.store.commitlog import CommitLog
from broker.store.queues import QueueSet
from broker.store.stats import StoreStats

log = logging.getLogger(__name__)


class Retention:
    """Deletes what ``retention_ms`` no longer keeps, or what a filling disk cannot."""

    def __init__(
        self,
        commitlog: CommitLog,
        queues: QueueSet,
        stats: StoreStats,
        *,
        retention_ms: int,
        maint_lock: threading.Lock,
    ) -> None:
        self.commitlog = commitlog
        self.queues = queues
        self.stats = stats
        self.retention_ms = retention_ms
        self.maint_lock = maint_lock

    def delete_expired(self, now: float | None = None, *, blocking: bool = True) -> int:
        """Delete sealed log segments older than ``retention_ms``; how many. Not ``blocking``:
        0 when a flush is under way (the next round does the work)."""
        cutoff = (time.time() if now is None else now) - self.retention_ms / 1000
        if not self.maint_lock.acquire(blocking=blocking):
            return 0
        try:
            deleted = self._delete_segments(cutoff, None)
        finally:
            self.maint_lock.release()
        for path in deleted:
            log.info("retention deleted commit-log segment %s", path.name)
        self.stats.segments_deleted_for_age += len(deleted)
        return len(deleted)

    def delete_oldest_segment(self, *, blocking: bool = True) -> Path | None:
        """Delete the oldest sealed segment whatever its age (the disk is filling up); None
        when only the segment being written is left (or, not ``blocking``, a flush is under way)."""
        if not self.maint_lock.acquire(blocking=blocking):
            return None
        try:
            deleted = self._delete_segments(float("inf"), 1)
        finally:
            self.maint_lock.release()
        self.stats.segments_deleted_for_space += len(deleted)
        return deleted[0] if deleted else None

    def _delete_segments(self, older_than: float, limit: int | None) -> list[Path]:
        deleted = self.commitlog.delete_expired(older_than, limit=limit)
        if deleted:
            log_min = self.commitlog.min_offset
            for cq in self.queues:
                cq.delete_expired(log_min)
        return deleted
