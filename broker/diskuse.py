"""Retention by disk use: a broker whose file system fills up makes room before writes fail.

Every ``retention_check_interval_ms``, and once a second for the send check:
- above ``disk_max_used_ratio`` (75%) the oldest commit-log segments are deleted, one by one,
  until the file system is below it again or only the segment being written is left, each
  with a warning and the ``disk`` count of ``rocketspark_storage_segments_deleted_total``;
- above ``disk_refuse_writes_ratio`` (90%) sends are refused (``DiskFullError``: nothing is
  stored, the producer may try another broker) until the file system is below it again.
Reads go on throughout. The ratio is the file system's, as ``df`` shows it (RocketMQ's
``diskMaxUsedSpaceRatio`` and its disk-full flag).
"""

from __future__ import annotations

import logging
import shutil
from dataclasses import dataclass
from pathlib import Path

from broker.store.store import MessageStore
from rocketspark.errors import DiskFullError

log = logging.getLogger(__name__)


MAX_DELETES_PER_ROUND = 10  # as RocketMQ's deleteFileBatchMax: a round never empties the log at once


def used_ratio(path: Path) -> float:
    """How full the file system holding ``path`` is, 0-1, as ``df`` shows it: used against
    used plus what is available to us (blocks reserved for root count as full)."""
    usage = shutil.disk_usage(path)
    room = usage.used + usage.free
    return usage.used / room if room else 0.0


@dataclass
class DiskUse:
    broker_name: str
    store: MessageStore
    max_used_ratio: float
    refuse_writes_ratio: float
    ratio: float = 0.0
    refusing: bool = False

    def refresh(self) -> float:
        """Measure the file system again; start or stop refusing writes."""
        self.ratio = used_ratio(self.store.path)
        refusing = self.ratio > self.refuse_writes_ratio
        if refusing != self.refusing:
            (log.error if refusing else log.warning)(
                "broker %s: disk %.0f%% used, %s disk_refuse_writes_ratio (%.0f%%): sends are %s",
                self.broker_name,
                self.ratio * 100,
                "above" if refusing else "back below",
                self.refuse_writes_ratio * 100,
                "refused until space is freed" if refusing else "taken again",
            )
        self.refusing = refusing
        return self.ratio

    def make_room(self) -> int:
        """Delete the oldest segments while the disk is above ``max_used_ratio``, at most
        ``MAX_DELETES_PER_ROUND`` a round (the next round goes on); how many. Skipped while the
        flusher holds the store (never waiting for an fsync on the event loop)."""
        deleted = 0
        while deleted < MAX_DELETES_PER_ROUND and self.refresh() > self.max_used_ratio:
            before = self.ratio
            gone = self.store.retention.delete_oldest_segment(blocking=False)
            if gone is None:
                break  # only the segment being written is left, or the flusher is busy
            deleted += 1
            log.warning(
                "broker %s: disk %.0f%% used, above disk_max_used_ratio (%.0f%%): deleted the oldest commit-log "
                "segment %s before its retention time; messages before log offset %d are gone",
                self.broker_name,
                self.ratio * 100,
                self.max_used_ratio * 100,
                gone.name,
                self.store.log_min_offset,
            )
            if self.refresh() >= before:
                log.error(
                    "broker %s: deleting segment %s freed nothing on the disk (%.0f%% used): something else is filling "
                    "it, or the file is still held open; stopped deleting for this round",
                    self.broker_name,
                    gone.name,
                    self.ratio * 100,
                )
                break
        return deleted

    def check_writable(self) -> None:
        if self.refusing:
            raise DiskFullError(
                f"broker {self.broker_name} refuses sends: its disk is {self.ratio:.0%} full, above "
                f"disk_refuse_writes_ratio ({self.refuse_writes_ratio:.0%}); nothing of this send was stored. Free "
                f"space on the file system of {self.store.path} (older segments are deleted above "
                f"disk_max_used_ratio, {self.max_used_ratio:.0%}) or send to another broker"
            )
