"""The batch record holding a physical offset: where an offset id points (``codec.ids``).

A message's physical offset is its batch record's log offset plus its place in the batch, a
position inside the record's own bytes, so the record starts at most ``max_record_bytes``
before it, in the same segment. The log before the offset is searched backwards for the batch
magic, nearest first, in windows that grow; a candidate is the record only if its header and
both CRCs check and its queue's consume queue has an entry at its log offset (a record's image
inside a message body, which a producer could send, is in no consume queue). The first record
that passes decides: the offset names its message ``offset - start`` when that is below its
count, else no message at all.
"""

from __future__ import annotations

from typing import Final, NamedTuple, Protocol

from rocketspark.codec.columns import decode
from rocketspark.codec.layout import BATCH_MAGIC_BYTES, HEADER_SIZE, PREFIX, RecordCorrupted

FIRST_WINDOW: Final = 64 * 1024


class Located(NamedTuple):
    phys: int  # the record's log offset
    place: int  # the message's place in it
    record: bytes


class LocatableLog(Protocol):
    """What the search reads: the store's log and its consume queues."""

    def read_record(self, phys: int, size: int) -> bytes | None: ...

    def has_record(self, topic: str, queue_id: int, phys: int) -> bool: ...


def record_holding(log: LocatableLog, physical: int, *, segment_bytes: int, max_record_bytes: int) -> Located | None:
    """The record whose message ``physical`` names, and the message's place; None when no
    stored message has that physical offset (never stored, deleted by retention, or a
    position between messages)."""
    if physical < 0:
        return None
    floor = physical - physical % segment_bytes  # records never cross a segment's end
    window = FIRST_WINDOW
    while True:
        low = max(floor, physical - window)
        data = log.read_record(low, physical - low + PREFIX.size)
        if data is None:
            return None
        end = len(data)
        while (at := data.rfind(BATCH_MAGIC_BYTES, 4, end)) >= 0:
            found = _record_at(log, low + at - 4, max_record_bytes)
            if found is not None:
                start, count, raw = found
                index = physical - start
                return Located(start, index, raw) if index < count else None
            end = at + len(BATCH_MAGIC_BYTES) - 1  # the next candidate starts before this one
        if low == floor or window >= max_record_bytes:
            return None
        window *= 4


def _record_at(log: LocatableLog, start: int, max_record_bytes: int) -> tuple[int, int, bytes] | None:
    """(start, count, bytes) of the record at ``start`` if one is stored there."""
    prefix = log.read_record(start, PREFIX.size)
    if prefix is None:
        return None
    total, _magic = PREFIX.unpack(prefix)
    if not HEADER_SIZE <= total <= max_record_bytes:
        return None
    raw = log.read_record(start, total)
    if raw is None:
        return None
    try:
        columns = decode(raw)
    except RecordCorrupted:
        return None
    row = columns.heads.rows[0]
    at = int(columns.heads.topic_at[0])
    try:
        topic = raw[at : at + int(row["topic_len"])].decode()
    except UnicodeDecodeError:
        return None
    if not log.has_record(topic, int(row["queue_id"]), start):
        return None
    return start, int(row["count"]), raw
