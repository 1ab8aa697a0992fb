"""The consume queue: a dense index of one (topic, queue) into the commit log, one entry per
batch record (RocketMQ 5's BatchConsumeQueue).

Entry ``i`` (the queue's i-th batch, its *slot*) is 40 bytes at position ``i * 40`` of the
queue's address space, big-endian::

     0  u64  commitlog_offset
     8  u32  size              record size in bytes; 0 marks lost records (a tombstone)
    12  u64  tag_summary       the batch's tag summary (``rocketspark.codec.layout``)
    20  u64  base_offset       queue offset of the batch's first message
    28  u32  count             messages in the batch
    32  u64  store_ms          when the broker stored it

Queue offsets stay per message (a message's offset is its batch's base plus its place in
the batch), so the message at a queue offset is found by binary search over the slots.
Entries live in fixed-size files under ``<store>/consumequeue/<topic>/<queueId>/``, each
holding ``entries_per_file`` entries and named by the 20-digit slot of its first entry. An
all-zero entry has never been written. Entries carry no CRC: the queue is derived data,
rebuilt from the commit log when it is damaged (RocketMQ and Kafka's indexes agree).
"""

from __future__ import annotations

import os
import shutil
import struct
from pathlib import Path
from typing import Final, NamedTuple

import numpy as np

from broker.store.mappedfile import MappedFile, Sync

ENTRY: Final = struct.Struct(">QIQQIQ")
ENTRY_SIZE: Final = ENTRY.size  # 40
ENTRY_DTYPE: Final = np.dtype(
    [("phys", ">u8"), ("size", ">u4"), ("tags", ">u8"), ("base", ">u8"), ("count", ">u4"), ("store_ms", ">u8")]
)
assert ENTRY_DTYPE.itemsize == ENTRY_SIZE
TAIL_SLOTS: Final = 64  # the newest entries read at once when looking up a slot (2,560 bytes)


class Entry(NamedTuple):
    phys: int
    size: int
    tags: int
    base: int
    messages: int  # in the batch
    store_ms: int

    @property
    def end(self) -> int:
        """Queue offset one past the batch's last message."""
        return self.base + self.messages


def _first_ending_after(entries: bytes, offset: int) -> int:
    """The first of these packed entries whose batch ends after ``offset`` (binary search; their
    count when none does)."""
    lo, hi = 0, len(entries) // ENTRY_SIZE
    while lo < hi:
        mid = (lo + hi) // 2
        _, _, _, base, count, _ = ENTRY.unpack_from(entries, mid * ENTRY_SIZE)
        if base + count <= offset:
            lo = mid + 1
        else:
            hi = mid
    return lo


class QueueDamaged(Exception):
    """A queue's files are inconsistent (a missing file); the caller rebuilds the queue."""


class ConsumeQueue:
    """One queue's index. Single writer; reads may come from the same thread only.

    ``min_slot``/``max_slot`` bound the entries; ``min_offset``/``max_offset`` the messages
    (a queue whose records all expired keeps its offsets, with no entry left)."""

    def __init__(
        self, directory: Path, topic: str, queue_id: int, entries_per_file: int, *, sync: Sync = os.fsync
    ) -> None:
        self.directory = directory
        self.sync = sync
        self.topic = topic
        self.queue_id = queue_id
        self.entries_per_file = entries_per_file
        self.file_bytes = entries_per_file * ENTRY_SIZE
        self.files: list[MappedFile] = []
        self.min_slot = 0
        self.max_slot = 0  # one past the newest entry
        self.min_offset = 0
        self.max_offset = 0  # one past the newest message
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
            self.files.append(
                MappedFile(path, first * ENTRY_SIZE, self.file_bytes, create=False, mapped=False, sync=self.sync)
            )
        if not self.files:
            return
        head, _ = _used_span(self.files[0])
        _, tail = _used_span(self.files[-1])
        if head is None or tail is None:
            if len(self.files) > 1:
                raise QueueDamaged(f"consume-queue files of {self.topic}/{self.queue_id} are empty")
            self.close_files(delete=True)
            return
        for f in self.files:
            f.wrote = f.flushed = self.file_bytes
        self.files[-1].wrote = self.files[-1].flushed = tail
        self.min_slot = (self.files[0].base + head) // ENTRY_SIZE
        self.max_slot = (self.files[-1].base + tail) // ENTRY_SIZE
        self.min_offset = self.entry(self.min_slot).base
        self.max_offset = self.entry(self.max_slot - 1).end

    def close_files(self, *, delete: bool = False) -> None:
        for f in self.files:
            f.delete() if delete else f.close()
        self.files = []
        if delete:
            self.min_slot = self.max_slot = 0
            self.min_offset = self.max_offset = 0

    def destroy(self) -> None:
        """Delete the queue and its directory (topic deletion, rebuild)."""
        self.close_files(delete=True)
        shutil.rmtree(self.directory, ignore_errors=True)

    # -- write -------------------------------------------------------------------------------

    def _file_for_write(self) -> MappedFile:
        byte_pos = self.max_slot * ENTRY_SIZE
        if self.files and byte_pos < self.files[-1].base + self.file_bytes:
            return self.files[-1]
        first = (self.max_slot // self.entries_per_file) * self.entries_per_file
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / f"{first:020d}"
        f = MappedFile(path, first * ENTRY_SIZE, self.file_bytes, create=True, mapped=False, sync=self.sync)
        f.wrote = byte_pos - f.base
        if not self.files:
            self.min_slot = self.max_slot
        self.files.append(f)
        return f

    def append(self, entries: bytes, end_offset: int) -> None:
        """Append packed entries at ``max_slot``; ``end_offset`` is one past their last message."""
        if not self.files and self.max_slot == self.min_slot:
            self.min_offset = ENTRY.unpack_from(entries)[3]
        view = memoryview(entries)
        while view:
            f = self._file_for_write()
            n = min(len(view), f.free)
            f.append(entries if n == len(entries) else view[:n])  # a send's one entry: no slice
            view = view[n:]
            self.max_slot += n // ENTRY_SIZE
        self.max_offset = end_offset
        self.dirty = True

    def append_entry(self, phys: int, size: int, tags: int, base: int, count: int, store_ms: int) -> None:
        """Append one batch's entry, packed here as the layout above says (``size`` 0: a
        tombstone standing for ``count`` lost messages)."""
        self.append(ENTRY.pack(phys, size, tags, base, count, store_ms), base + count)

    # -- read --------------------------------------------------------------------------------

    def read(self, slot: int, max_count: int) -> bytes:
        """Packed entries from ``slot``: at most ``max_count``, never past one file's end."""
        if slot < self.min_slot or slot >= self.max_slot or max_count <= 0:
            return b""
        byte_pos = slot * ENTRY_SIZE
        f = self.files[(byte_pos - self.files[0].base) // self.file_bytes]
        pos = byte_pos - f.base
        n = min(max_count * ENTRY_SIZE, f.wrote - pos, (self.max_slot - slot) * ENTRY_SIZE)
        return f.read(pos, n)

    def entry(self, slot: int) -> Entry:
        data = self.read(slot, 1)
        if not data:
            raise IndexError(f"{self.topic}/{self.queue_id} has no entry at slot {slot}")
        return Entry(*ENTRY.unpack(data))

    def slot_for(self, offset: int) -> int:
        """The slot of the batch holding queue ``offset`` (binary search); ``max_slot`` past
        the last message, ``min_slot`` before the first."""
        return self.find(offset)[0]

    def find(self, offset: int) -> tuple[int, bytes]:
        """``slot_for(offset)``, and the packed entries from that slot on that the search read
        already (empty when the slot lies before the newest entries): a pull reads those first,
        not again.

        The newest ``TAIL_SLOTS`` entries (of the last file) are read first, in one ``pread``:
        a reader that keeps up (a consumer following the queue) finds its slot there, where a
        search of the whole queue reads one entry at a time, twenty reads for a million."""
        lo, hi = self.min_slot, self.max_slot
        if lo < hi:
            tail = max(lo, hi - TAIL_SLOTS, (hi - 1) // self.entries_per_file * self.entries_per_file)
            data = self.read(tail, hi - tail)
            if len(data) == (hi - tail) * ENTRY_SIZE:
                at = _first_ending_after(data, offset)
                # found, unless the tail's first entry starts after ``offset``: the batch may be older
                if at or tail == lo or ENTRY.unpack_from(data)[3] <= offset:
                    return tail + at, data[at * ENTRY_SIZE :]
                hi = tail
        while lo < hi:
            mid = (lo + hi) // 2
            if self.entry(mid).end <= offset:
                lo = mid + 1
            else:
                hi = mid
        return lo, b""

    def first_slot_at_or_after(self, phys_limit: int) -> int:
        """The first slot whose commit-log offset is >= ``phys_limit`` (binary search)."""
        lo, hi = self.min_slot, self.max_slot
        while lo < hi:
            mid = (lo + hi) // 2
            if self.entry(mid).phys < phys_limit:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def offset_for_time(self, timestamp_ms: int) -> int:
        """The first queue offset stored at or after ``timestamp_ms`` (``max_offset`` if none);
        a batch's messages share its store time."""
        lo, hi = self.min_slot, self.max_slot
        while lo < hi:
            mid = (lo + hi) // 2
            if self.entry(mid).store_ms < timestamp_ms:
                lo = mid + 1
            else:
                hi = mid
        return self.entry(lo).base if lo < self.max_slot else self.max_offset

    def last_store_ms(self) -> int:
        """When the newest message was stored (0 for a queue with no entry)."""
        return self.entry(self.max_slot - 1).store_ms if self.max_slot > self.min_slot else 0

    def indexes(self, phys: int) -> bool:
        """Whether a batch record at log offset ``phys`` has an entry here."""
        slot = self.first_slot_at_or_after(phys)
        return slot < self.max_slot and self.entry(slot).phys == phys

    # -- truncation, retention, durability -------------------------------------------------------

    def truncate_slot(self, slot: int) -> None:
        """Drop the entries at slots >= ``slot``."""
        if slot >= self.max_slot:
            return
        slot = max(slot, self.min_slot)
        new_max = self.entry(slot).base if slot < self.max_slot else self.max_offset
        while self.files and self.files[-1].base >= slot * ENTRY_SIZE and len(self.files) > 1:
            self.files.pop().delete()
        if self.files:
            last = self.files[-1]
            last.zero_from(slot * ENTRY_SIZE - last.base)
            last.wrote = slot * ENTRY_SIZE - last.base
        self.max_slot = slot
        self.max_offset = new_max
        if self.max_slot <= self.min_slot:
            self.close_files(delete=True)
            self.min_slot = self.max_slot = slot
            self.min_offset = self.max_offset = new_max
        self.dirty = True

    def truncate_offset(self, offset: int) -> None:
        """Drop the batches that start at queue offsets >= ``offset``."""
        if offset < self.max_offset:
            slot = self.slot_for(offset)
            if slot < self.max_slot and self.entry(slot).base < offset:
                slot += 1  # the batch holding ``offset`` starts before it: it stays
            self.truncate_slot(slot)

    def truncate_phys(self, phys_limit: int) -> int:
        """Drop entries pointing at or past ``phys_limit``; return how many were dropped."""
        cut = self.first_slot_at_or_after(phys_limit)
        dropped = self.max_slot - cut
        self.truncate_slot(cut)
        return dropped

    def delete_expired(self, log_min_offset: int) -> int:
        """Forget entries whose records left the commit log; return the new min offset.

        The newest file is always kept, even when every entry in it expired, so the queue's
        offsets survive a restart and are never handed out twice (RocketMQ does the same).
        """
        if self.max_slot == self.min_slot:
            return self.min_offset
        new_min = self.first_slot_at_or_after(log_min_offset)
        while len(self.files) > 1 and self.files[1].base <= new_min * ENTRY_SIZE:
            self.files.pop(0).delete()
        if new_min > self.min_slot:
            self.min_slot = new_min
            self.min_offset = self.entry(new_min).base if new_min < self.max_slot else self.max_offset
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
