"""Walking the commit log record by record, as recovery and queue rebuilds need.

``scan_segment`` yields every intact record of one segment and reports every damaged region
it had to step over. A damaged region is found by its header (bad magic, impossible size) or
its CRC; the scan then looks for the next intact record (magic, sane size and matching CRC)
so that one bad record does not cost every record after it.
"""

from __future__ import annotations

import mmap
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

from broker.store.mappedfile import MappedFile
from rocketspark.codec import layout
from rocketspark.codec.heads import check_record
from rocketspark.codec.layout import RecordCorrupted

_HEAD: Final = layout.PREFIX


@dataclass(frozen=True, slots=True)
class ScannedRecord:
    """One batch record's header, as recovery and rebuilds index it."""

    phys: int
    size: int
    topic: str
    queue_id: int
    queue_offset: int  # of the first message
    count: int
    store_ms: int
    tag_summary: int
    producer_id: int
    producer_epoch: int
    base_sequence: int

    @property
    def end_offset(self) -> int:
        return self.queue_offset + self.count


@dataclass(frozen=True, slots=True)
class Damage:
    """A byte range of the log that held no intact record."""

    start: int
    end: int
    reason: str

    def __str__(self) -> str:
        return f"[{self.start}, {self.end}) {self.end - self.start} bytes: {self.reason}"


@dataclass(slots=True)
class SegmentScan:
    end: int = 0  # segment-relative end of the last intact record (or blank)
    sealed: bool = False  # ended with a blank record: the log continues in the next segment


def parse_record(mm: memoryview | bytes, pos: int, base: int) -> ScannedRecord:
    head = layout.HEADER.unpack_from(mm, pos)
    total, tlen = head[layout.F_TOTAL], head[layout.F_TOPIC_LEN]
    at = pos + layout.head_size(head[layout.F_VERSION])
    topic = bytes(mm[at : at + tlen]).decode()
    return ScannedRecord(
        base + pos,
        total,
        topic,
        head[layout.F_QUEUE_ID],
        head[layout.F_BASE_OFFSET],
        head[layout.F_COUNT],
        head[layout.F_STORE_MS],
        head[layout.F_TAG_SUMMARY],
        head[layout.F_PRODUCER_ID],
        head[layout.F_PRODUCER_EPOCH],
        head[layout.F_BASE_SEQUENCE],
    )


def _resync(mm: memoryview, raw: mmap.mmap, start: int, limit: int) -> int | None:
    """Position of the next intact record after ``start``, or None."""
    probe = start + layout.MIN_BLANK_SIZE  # a gap must hold its own marker
    while True:
        hit = raw.find(layout.BATCH_MAGIC_BYTES, probe + 4, limit)
        if hit < 0:
            return None
        candidate = hit - 4
        try:
            check_record(mm, candidate, limit)
            return candidate
        except RecordCorrupted:
            probe = candidate + 1


def scan_segment(
    segment: MappedFile,
    *,
    is_last: bool,
    damage: list[Damage],
    verify: bool = True,
    start: int = 0,
) -> Iterator[ScannedRecord | SegmentScan]:
    """Yield the segment's intact records from ``start`` (a record boundary), then one
    SegmentScan telling where the data ended.

    Damaged regions are appended to ``damage``; the caller decides what to do with them.
    """
    raw = segment.view()
    mm = memoryview(raw)
    size = segment.size
    pos = start
    state = SegmentScan(end=start)
    try:
        while pos + layout.MIN_BLANK_SIZE <= size:
            total, magic = _HEAD.unpack_from(mm, pos)
            if magic == layout.BLANK_MAGIC and total == size - pos:
                state.end, state.sealed = size, True
                break
            if magic == layout.GAP_MAGIC and layout.MIN_BLANK_SIZE <= total <= size - pos:
                pos += total  # cut by an earlier recovery; already reported then
                state.end = pos
                continue
            if total == 0 and magic == 0:
                break  # never written: the end of this segment's data
            try:
                if verify:
                    check_record(mm, pos, size)
                elif magic != layout.BATCH_MAGIC or total < layout.HEADER_SIZE or pos + total > size:
                    raise RecordCorrupted("bad header", pos)
                yield parse_record(mm, pos, segment.base)
                pos += total
                state.end = pos
            except (RecordCorrupted, ValueError) as exc:
                nxt = _resync(mm, raw, pos, size)
                # In a sealed segment the rest is lost, zeros or not; in the last, cut the garbage.
                stop = nxt if nxt is not None else _data_end(raw, pos, size) if is_last else size
                damage.append(Damage(segment.base + pos, segment.base + stop, str(exc)))
                if nxt is None:
                    if not is_last:  # the rest of a sealed segment becomes padding
                        segment.write_at(pos, layout.encode_blank(size - pos)[: layout.MIN_BLANK_SIZE])
                        state.end, state.sealed = size, True
                    break
                segment.write_at(pos, _HEAD.pack(nxt - pos, layout.GAP_MAGIC))
                pos = nxt
                state.end = pos
        yield state
    finally:
        mm.release()
        segment.release()  # the pages scanned stay cached, not mapped into this process


def _data_end(raw: mmap.mmap, pos: int, size: int) -> int:
    """One past the last non-zero byte at or after ``pos`` (how far the garbage goes)."""
    return pos + len(bytes(raw[pos:size]).rstrip(b"\0")) or pos


def records_after(segments: list[MappedFile], offset: int) -> Iterator[ScannedRecord]:
    """The header of every record of the log's ``segments`` from log offset ``offset`` (a
    record boundary, or before the log's start) to the end, in log order."""
    for i, segment in enumerate(segments):
        if segment.end <= offset:
            continue
        start = max(0, offset - segment.base)
        for item in scan_segment(segment, is_last=i == len(segments) - 1, damage=[], verify=False, start=start):
            if isinstance(item, ScannedRecord) and item.phys < segment.base + segment.wrote:
                yield item
