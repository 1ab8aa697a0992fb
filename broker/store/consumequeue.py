"""The consume queue: a dense index of one (topic, queue) into the commit log.

Entry ``i`` (the message at queue offset ``i``) is 20 bytes at position ``i * 20`` of the
queue's address space, big-endian::

     0  u64  commitlog_offset
     8  u32  size              record size in bytes; 0 marks a lost record (a tombstone)
    12  u64  tag_hash          CRC32 of the tag, 0 when untagged; the server-side filter

Entries live in fixed-size files under ``<store>/consumequeue/<topic>/<queueId>/``, each
holding ``entries_per_file`` entries and named by the 20-digit queue offset of its first
entry. An all-zero entry has never been written. Entries carry no CRC: the queue is derived
data, rebuilt from the commit log when it is damaged (RocketMQ and Kafka's indexes agree).
"""

from __future__ import annotations

import os
import shutil
import struct
from pathlib import Path
from typing import Final

from broker.store.mappedfile import MappedFile

ENTRY: Final = struct.Struct(">QIQ")
ENTRY_SIZE: Final = ENTRY.size  # 20
_PHYS = struct.Struct(">Q")


class QueueDamaged(Exception):
    """A queue's files are inconsistent (a missing file); the caller rebuilds the queue."""


class ConsumeQueue:
    """One queue's index. Single writer; reads may come from the same thread only."""

    def __init__(self, directory: Path, topic: str, queue_id: int, entries_per_file: int) -> None:
        self.directory = directory
        self.topic = topic
        self.queue_id = queue_id
        self.entries_per_file = entries_per_file
        self.file_bytes = entries_per_file * ENTRY_SIZE
        self.files: list[MappedFile] = []
        self.min_offset = 0
        self.max_offset = 0  # one past the newest entry
        self.dirty = False

    # -- lifecycle ---------------------------------------------------------------------------

    def load(self) -> None:
        """Map existing files and find the first and last entries. Raise QueueDamaged on a gap."""
        if not self.directory.exists():
            return
        names = sorted(p for p in self.directory.iterdir() if p.name.isdigit() and len(p.name) == 20)
        for path in names:
            first = int(path.name)
            if first % self.entries_per_file:
                raise QueueDamaged(f"{path} does not start at a multiple of {self.entries_per_file} entries")
            if self.files and first * ENTRY_SIZE != self.files[-1].base + self.file_bytes:
                raise QueueDamaged(f"a consume-queue file is missing before {path}")
            self.files.append(MappedFile(path, first * ENTRY_SIZE, self.file_bytes, create=False, mapped=False))
        if not self.files:
            return
        head, _ = _used_span(self.files[0])
        _, tail = _used_span(self.files[-1])
        if head is None or tail is None:
            if len(self.files) > 1:
                raise QueueDamaged(f"consume-queue files of {self.topic}/{self.queue_id} are empty")
            self.close_files(delete=True)
            return
        self.min_offset = (self.files[0].base + head) // ENTRY_SIZE
        self.max_offset = (self.files[-1].base + tail) // ENTRY_SIZE
        for f in self.files:
            f.wrote = f.flushed = self.file_bytes
        self.files[-1].wrote = self.files[-1].flushed = tail

    def close_files(self, *, delete: bool = False) -> None:
        for f in self.files:
            f.delete() if delete else f.close()
        self.files = []
        if delete:
            self.min_offset = self.max_offset = 0

    def destroy(self) -> None:
        """Delete the queue and its directory (topic deletion, rebuild)."""
        self.close_files(delete=True)
        shutil.rmtree(self.directory, ignore_errors=True)

    # -- write -------------------------------------------------------------------------------

    def _file_for_write(self) -> MappedFile:
        byte_pos = self.max_offset * ENTRY_SIZE
        if self.files and byte_pos < self.files[-1].base + self.file_bytes:
            return self.files[-1]
        first = (self.max_offset // self.entries_per_file) * self.entries_per_file
        self.directory.mkdir(parents=True, exist_ok=True)
        f = MappedFile(self.directory / f"{first:020d}", first * ENTRY_SIZE, self.file_bytes, create=True, mapped=False)
        f.wrote = byte_pos - f.base
        if not self.files:
            self.min_offset = self.max_offset
        self.files.append(f)
        return f

    def append(self, entries: bytes) -> None:
        """Append packed entries at ``max_offset``."""
        view = memoryview(entries)
        while view:
            f = self._file_for_write()
            n = min(len(view), f.free)
            f.append(view[:n])
            view = view[n:]
            self.max_offset += n // ENTRY_SIZE
        self.dirty = True

    def start_at(self, offset: int) -> None:
        """Make an empty queue begin at ``offset`` (rebuilt after old log segments expired)."""
        if self.files:
            raise ValueError("start_at needs an empty queue")
        self.min_offset = self.max_offset = offset

    # -- read --------------------------------------------------------------------------------

    def read(self, offset: int, max_count: int) -> bytes:
        """Packed entries from ``offset``: at most ``max_count``, never past one file's end."""
        if offset < self.min_offset or offset >= self.max_offset or max_count <= 0:
            return b""
        byte_pos = offset * ENTRY_SIZE
        f = self.files[(byte_pos - self.files[0].base) // self.file_bytes]
        pos = byte_pos - f.base
        n = min(max_count * ENTRY_SIZE, f.wrote - pos, (self.max_offset - offset) * ENTRY_SIZE)
        return f.read(pos, n)

    def entry(self, offset: int) -> tuple[int, int, int]:
        data = self.read(offset, 1)
        if not data:
            raise IndexError(f"{self.topic}/{self.queue_id} has no entry at {offset}")
        phys, size, tag_hash = ENTRY.unpack(data)
        return phys, size, tag_hash

    def first_offset_at_or_after(self, phys_limit: int) -> int:
        """The first queue offset whose commit-log offset is >= ``phys_limit`` (binary search)."""
        lo, hi = self.min_offset, self.max_offset
        while lo < hi:
            mid = (lo + hi) // 2
            if self.entry(mid)[0] < phys_limit:
                lo = mid + 1
            else:
                hi = mid
        return lo

    # -- truncation, retention, durability -------------------------------------------------------

    def truncate_offset(self, offset: int) -> None:
        """Drop entries at queue offsets >= ``offset``."""
        if offset >= self.max_offset:
            return
        offset = max(offset, self.min_offset)
        while self.files and self.files[-1].base >= offset * ENTRY_SIZE and len(self.files) > 1:
            self.files.pop().delete()
        if self.files:
            last = self.files[-1]
            last.zero_from(offset * ENTRY_SIZE - last.base)
            last.wrote = offset * ENTRY_SIZE - last.base
        self.max_offset = offset
        if self.max_offset <= self.min_offset:
            self.close_files(delete=True)
            self.min_offset = self.max_offset = offset
        self.dirty = True

    def truncate_phys(self, phys_limit: int) -> int:
        """Drop entries pointing at or past ``phys_limit``; return how many were dropped."""
        cut = self.first_offset_at_or_after(phys_limit)
        dropped = self.max_offset - cut
        self.truncate_offset(cut)
        return dropped

    def delete_expired(self, log_min_offset: int) -> int:
        """Forget entries whose records left the commit log; return the new min offset.

        The newest file is always kept, even when every entry in it expired, so the queue's
        offsets survive a restart and are never handed out twice (RocketMQ does the same).
        """
        if self.max_offset == self.min_offset:
            return self.min_offset
        new_min = self.first_offset_at_or_after(log_min_offset)
        while len(self.files) > 1 and self.files[1].base <= new_min * ENTRY_SIZE:
            self.files.pop(0).delete()
        self.min_offset = max(self.min_offset, new_min)
        return self.min_offset

    def flush(self) -> None:
        if self.dirty:
            self.dirty = False  # before the fsync: an append made meanwhile sets it again
            try:
                for f in self.files:
                    if f.flushed < f.wrote:
                        f.flush()
            except BaseException:
                self.dirty = True  # retried by the next flush
                raise

    def disk_usage(self) -> int:
        return sum(os.stat(f.path).st_blocks * 512 for f in self.files)


def _used_span(f: MappedFile) -> tuple[int | None, int | None]:
    """File-relative byte positions of the first used entry and one past the last one."""
    head: int | None = None
    tail: int | None = None
    for start, stop in f.data_extents(0):
        chunk = f.read(start, stop - start)
        stripped = chunk.lstrip(b"\0")
        if stripped:
            if head is None:
                head = start + len(chunk) - len(stripped)
            tail_in_chunk = len(chunk.rstrip(b"\0"))
            tail = start + tail_in_chunk
    if head is None or tail is None:
        return None, None
    head -= head % ENTRY_SIZE
    tail = -(-tail // ENTRY_SIZE) * ENTRY_SIZE
    return head, tail
