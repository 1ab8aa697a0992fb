"""The commit log: every message of every topic, appended to fixed-size segment files.

Segments live in ``<store>/commitlog/`` and are named by the 20-digit log offset of their
first byte (``00000000000000000000``, ``00000000000134217728``, ...), as in RocketMQ. A
record never spans two segments: when the next record does not fit, the rest of the segment
is filled with a blank record (see :mod:`rocketspark.codec.layout`) and a new segment is
started. Records are batch records (``rocketspark.codec.layout``); each carries its CRCs.

The commit log is the truth. Consume queues are derived from it and rebuilt after a crash
(:mod:`broker.store.recovery`).
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

from broker.store.mappedfile import MappedFile, Sync
from rocketspark.codec import layout
from rocketspark.codec.build import stamped_head

log = logging.getLogger(__name__)


class CommitLog:
    """Append and read records by log offset. Single writer (the broker's event loop)."""

    def __init__(self, directory: Path, segment_bytes: int, *, sync: Sync = os.fsync) -> None:
        self.directory = directory
        self.segment_bytes = segment_bytes
        self.sync = sync
        self.segments: list[MappedFile] = []
        self.short_segments: list[str] = []  # segments found shorter than segment_bytes at load
        directory.mkdir(parents=True, exist_ok=True)

    # -- lifecycle -------------------------------------------------------------------------

    def load(self) -> None:
        """Map existing segments (recovery then sets each one's write position)."""
        names = sorted(p for p in self.directory.iterdir() if p.name.isdigit() and len(p.name) == 20)
        for path in names:
            base = int(path.name)
            if base % self.segment_bytes:
                raise ValueError(
                    f"commit-log segment {path} does not start at a multiple of segment_bytes "
                    f"({self.segment_bytes}); was the store created with another segment size?"
                )
            if self.segments and base != self.segments[-1].base + self.segment_bytes:
                missing = self.segments[-1].base + self.segment_bytes
                raise ValueError(
                    f"commit-log segment {missing:020d} is missing between {self.segments[-1].path.name} and "
                    f"{path.name}; restore it from a backup or move the later segments away"
                )
            actual = path.stat().st_size
            if actual < self.segment_bytes:
                log.warning(
                    "commit-log segment %s is %d bytes, not %d: it was truncated; every record in it is verified "
                    "and what was lost is reported",
                    path.name,
                    actual,
                    self.segment_bytes,
                )
                self.short_segments.append(path.name)
            segment = MappedFile(path, base, self.segment_bytes, create=False, sync=self.sync)
            segment.wrote = self.segment_bytes  # assume full until recovery finds the real end
            segment.flushed = self.segment_bytes
            self.segments.append(segment)
        if self.segments:
            self._refuse_an_older_format(self.segments[0])

    def _refuse_an_older_format(self, first: MappedFile) -> None:
        """A log of per-message records (rocketspark's format 1) would be cut as damage by
        recovery: refuse it whole, naming what to do, rather than lose it."""
        if layout.PREFIX.unpack_from(first.read(0, layout.PREFIX.size))[1] == layout.FORMAT_1_MAGIC:
            self.close()
            raise ValueError(
                f"the commit log in {self.directory} was written by an older rocketspark (one record per message, "
                "format 1); this broker stores batch records (format 2) and cannot read it. Drain its topics with "
                "the older version (or let them expire) and start this one on an empty data_dir"
            )

    def close(self) -> None:
        for segment in self.segments:
            segment.close()
        self.segments = []

    # -- offsets ---------------------------------------------------------------------------

    @property
    def min_offset(self) -> int:
        return self.segments[0].base if self.segments else 0

    @property
    def max_offset(self) -> int:
        """One past the last written byte: where the next record goes."""
        return self.segments[-1].end if self.segments else 0

    def segment_for(self, offset: int) -> MappedFile | None:
        if not self.segments:
            return None
        index = (offset - self.segments[0].base) // self.segment_bytes
        if 0 <= index < len(self.segments):
            return self.segments[index]
        return None

    # -- append ----------------------------------------------------------------------------

    def _writable(self) -> MappedFile:
        if not self.segments:
            return self._roll(0)
        return self.segments[-1]

    def _roll(self, base: int) -> MappedFile:
        if self.segments:
            self.segments[-1].touch(time.time())  # a sealed segment's mtime is its last write
        segment = MappedFile(self.directory / f"{base:020d}", base, self.segment_bytes, create=True, sync=self.sync)
        self.segments.append(segment)
        return segment

    def append_batch(self, record: bytes, queue_id: int, base_offset: int, store_ms: int) -> int:
        """Append one batch record as its producer built it, with the fields the broker assigns
        filled in (``codec.build.stamped_head``); return its log offset.

        The caller guarantees the record fits in an empty segment (the config enforces it);
        when it does not fit in this one, the rest is padded with a blank record.
        """
        size = len(record)
        segment = self._writable()
        if segment.wrote + size > self.segment_bytes - layout.MIN_BLANK_SIZE:  # room for a blank marker
            segment.append(layout.encode_blank(self.segment_bytes - segment.wrote))
            segment = self._roll(segment.base + self.segment_bytes)
        phys = segment.base + segment.wrote
        segment.append_parts(
            [stamped_head(record, queue_id, base_offset, phys, store_ms), memoryview(record)[layout.BODY_AT :]]
        )
        return phys

    def append_raw(self, offset: int, data: bytes | memoryview) -> None:
        """Append bytes copied from another replica's log, at the same log offset (a slave's
        log is byte for byte its master's, blank records and segment boundaries included)."""
        if self.segments and offset != self.max_offset and not self._at_segment_end(offset):
            raise ValueError(f"a copied chunk starts at log offset {offset}, but this log ends at {self.max_offset}")
        if not self.segments or self._at_segment_end(offset):
            if offset % self.segment_bytes:
                raise ValueError(
                    f"a copied log starts at offset {offset}, not a segment boundary: segment_bytes "
                    f"({self.segment_bytes}) must be the same on every replica of a group"
                )
            self._roll(offset)
        segment = self.segments[-1]
        if segment.wrote + len(data) > segment.size:
            raise ValueError(f"a copied chunk of {len(data)} bytes at {offset} crosses the end of its segment")
        segment.append(data)

    def _at_segment_end(self, offset: int) -> bool:
        last = self.segments[-1]
        return offset == last.base + last.size and last.wrote == last.size

    def read_chunk(self, offset: int, max_bytes: int) -> bytes:
        """Up to ``max_bytes`` of the log from ``offset``, never across a segment's end: what a
        slave copies. Empty at the end of the log."""
        segment = self.segment_for(offset)
        if segment is None:
            return b""
        pos = offset - segment.base
        return segment.read(pos, max(0, min(max_bytes, segment.wrote - pos)))

    # -- read ------------------------------------------------------------------------------

    def read(self, offset: int, size: int) -> bytes | None:
        """The ``size`` bytes at ``offset``, or None when that part of the log is gone."""
        segment = self.segment_for(offset)
        if segment is None:
            return None
        pos = offset - segment.base
        if pos + size > segment.wrote:
            return None
        return segment.read(pos, size)

    # -- durability and retention ------------------------------------------------------------

    def flush(self) -> int:
        """fsync every segment with unflushed data; return the flushed log offset."""
        for segment in self.segments:
            if segment.flushed < segment.wrote:
                segment.flush()
        return self.max_offset

    def delete_expired(self, older_than: float, *, keep_last: int = 1, limit: int | None = None) -> list[Path]:
        """Delete sealed segments last written before ``older_than`` (epoch seconds), oldest
        first, at most ``limit`` of them.

        Deletion stops at the first segment that is still young, so the log stays contiguous.
        """
        deleted: list[Path] = []
        while len(self.segments) > keep_last and self.segments[0].mtime() < older_than:
            if limit is not None and len(deleted) >= limit:
                break
            segment = self.segments.pop(0)
            deleted.append(segment.path)
            segment.delete()
        return deleted

    def truncate(self, offset: int) -> None:
        """Drop everything at and after ``offset`` (recovery of a torn tail)."""
        while self.segments and self.segments[-1].base > offset:
            self.segments.pop().delete()
        if self.segments:
            last = self.segments[-1]
            pos = offset - last.base
            if pos < last.wrote:
                last.zero_from(pos)
            last.wrote = pos

    def disk_usage(self) -> int:
        return sum(os.stat(s.path).st_blocks * 512 for s in self.segments)
