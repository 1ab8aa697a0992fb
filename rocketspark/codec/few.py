"""A few records read field by field with ``struct``: the checks of ``heads`` and ``columns``
for a buffer too small for numpy to pay (its fixed cost per call is most of what reading one
small record costs, and a consumer following a queue a message at a time reads one record per
response).

The rules are the numpy checks', applied in their order (each rule over every record before
the next), so both name the same record and fault for any buffer;
``tests/unit/test_decode_few.py`` holds them to it. A header is ``layout.HEADER``'s tuple of
fields (``layout.F_*`` name their places); a numpy header row's ``tolist()`` has the same first
19.
"""

from __future__ import annotations

import struct
import zlib
from typing import Any, Final

from rocketspark.codec.layout import (
    BODY_AT,
    BROKER_AT,
    BROKER_END,
    COMPRESSION_MASK,
    F_ATTRIBUTES,
    F_COUNT,
    F_SECTION_SIZE,
    F_TOPIC_LEN,
    F_TOTAL,
    F_VERSION,
    HAS_TAG,
    MAX_COUNT,
    NONE,
    V2,
    VERSION,
    RecordCorrupted,
)

SMALL_RECORDS: Final = 8  # this few records' fields are checked in Python
SMALL_MESSAGES: Final = 32  # this few messages (in at most SMALL_RECORDS records) are read with struct
_U32S: Final = {k: struct.Struct(f"<{k}I") for k in range(6, 3 * (SMALL_MESSAGES + 1) + 1, 3)}  # a record's offsets

Head = tuple[Any, ...]
Row = tuple[int, int, int, int, int, int, int, int, int]  # record, index, body at/len, tag at/len, has tag, ext at/len


def record_fault(pos: int, what: str) -> RecordCorrupted:
    """The error for the record at byte ``pos``: what it has that does not hold together."""
    return RecordCorrupted(f"the record at byte {pos} has {what}", pos)


def check_crcs(
    buf: bytes | memoryview, starts: list[int], totals: list[int], header_crcs: list[int], body_crcs: list[int]
) -> None:
    """Both CRCs of every record, record by record (the body's first): checked before any
    field, since a damaged byte is damage whatever field it landed in."""
    view = memoryview(buf)
    crc32 = zlib.crc32
    for pos, total, header_crc, body_crc in zip(starts, totals, header_crcs, body_crcs, strict=True):
        if crc32(view[pos + BODY_AT : pos + total]) != body_crc:
            raise RecordCorrupted(f"body CRC mismatch in the record at byte {pos}", pos)
        if crc32(view[pos + BROKER_AT : pos + BROKER_END]) != header_crc:
            raise RecordCorrupted(f"header CRC mismatch in the record at byte {pos}", pos)


def check_fields(heads: list[Head], topic_ats: list[int], starts: list[int], max_section: int) -> None:
    """Version, count, section size, and sizes that add up (``heads._check_fields``'s rules)."""
    for pos, head in zip(starts, heads, strict=True):
        if head[F_VERSION] != VERSION and head[F_VERSION] != V2:
            raise record_fault(pos, f"version {head[F_VERSION]} (this reader knows {V2} and {VERSION})")
    for pos, head in zip(starts, heads, strict=True):
        if not 1 <= head[F_COUNT] <= MAX_COUNT:
            raise record_fault(pos, f"a count of {head[F_COUNT]}")
    for pos, head in zip(starts, heads, strict=True):
        if head[F_SECTION_SIZE] > max_section:
            size = head[F_SECTION_SIZE]
            raise record_fault(pos, f"a message section of {size} bytes, over the limit of {max_section} bytes")
    for pos, head, topic_at in zip(starts, heads, topic_ats, strict=True):
        room = head[F_TOTAL] - topic_at - head[F_TOPIC_LEN]
        size, plain = head[F_SECTION_SIZE], (head[F_ATTRIBUTES] & COMPRESSION_MASK) == NONE
        if room < 0 or (plain and room != size) or size < 13 * head[F_COUNT] + 12:
            raise record_fault(pos, "sizes that do not add up (topic, section and record size disagree)")


def message_rows(
    data: bytes | memoryview, starts: list[int], secs: list[int], counts: list[int], sizes: list[int]
) -> list[Row]:
    """Where each message's body, tag and keys/properties lie in ``data`` (whose message
    sections start at ``secs``), record by record: the offsets' sums, then offsets going
    backwards, then flags against tags, each over every record before the next (the order
    numpy's checks in ``columns.decode`` name a record in)."""
    offsets = [_U32S[3 * (n + 1)].unpack_from(data, at) for at, n in zip(secs, counts, strict=True)]
    for pos, values, at, n, size in zip(starts, offsets, secs, counts, sizes, strict=True):
        ends = values[n] + values[2 * n + 1] + values[3 * n + 2]
        if values[0] or values[n + 1] or values[2 * n + 2] or at + 13 * n + 12 + ends != at + size:
            raise record_fault(pos, "a message section whose offsets do not add up to its size")
    for pos, values, n in zip(starts, offsets, counts, strict=True):
        if any(values[k + 1] < values[k] for k in range(3 * n + 2) if k % (n + 1) != n):
            raise record_fault(pos, "message offsets that go backwards")
    rows: list[Row] = []
    flagged: int | None = None
    for r, (values, at, n) in enumerate(zip(offsets, secs, counts, strict=True)):
        flags_at = at + 12 * (n + 1)
        body_base = flags_at + n
        tag_base = body_base + values[n]
        ext_base = tag_base + values[2 * n + 1]
        for i in range(n):
            flag, tag_len = data[flags_at + i], values[n + 2 + i] - values[n + 1 + i]
            if flagged is None and (flag > HAS_TAG or (not flag & HAS_TAG and tag_len > 0)):
                flagged = r
            rows.append((r, i, body_base + values[i], values[i + 1] - values[i], tag_base + values[n + 1 + i],
                         tag_len, flag & HAS_TAG, ext_base + values[2 * n + 2 + i],
                         values[2 * n + 3 + i] - values[2 * n + 2 + i]))  # fmt: skip
    if flagged is not None:
        raise record_fault(starts[flagged], "message flags that disagree with its tags")
    return rows
