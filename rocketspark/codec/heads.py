"""A buffer's records, walked and their headers checked before any message is read: the
chain of sizes (``record_starts``), every header as one numpy row (``Heads``, ``read_heads``:
version, count, sizes and both CRCs), and one record at a time for walkers of the log
(``check_record``: recovery, the scrub). :mod:`rocketspark.codec.columns` reads the messages
of what passed.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from rocketspark.codec.few import SMALL_RECORDS, check_crcs, check_fields, record_fault
from rocketspark.codec.layout import (
    BATCH_MAGIC,
    BODY_AT,
    BROKER_AT,
    BROKER_END,
    COMPRESSION_MASK,
    F_BODY_CRC,
    F_HEADER_CRC,
    F_VERSION,
    HEADER,
    HEADER_DTYPE,
    HEADER_SIZE,
    ID_SIZE,
    MAX_COUNT,
    NONE,
    PREFIX,
    V2,
    VERSION,
    VERSIONS,
    RecordCorrupted,
)

I64 = npt.NDArray[np.int64]
MAX_SECTION: Final = 1 << 30  # a larger uncompressed section is damage, whatever the limits
_HEAD_SPAN: Final = np.arange(HEADER_SIZE, dtype=np.int64)


@dataclass(frozen=True, slots=True)
class Heads:
    """The headers of the records of a buffer, one row each (see ``layout.HEADER_DTYPE``)."""

    starts: I64  # where each record starts in the buffer
    rows: np.ndarray  # structured, HEADER_DTYPE
    topic_at: I64  # where each record's topic starts, from its start (version 2's header is shorter)

    @classmethod
    def of(cls, raw: npt.NDArray[np.uint8], starts: I64) -> Heads:
        """The headers of the records starting at ``starts`` in ``raw`` (each at least
        ``HEADER_SIZE`` bytes long). A version-2 row's first id, which would be its topic and
        section's first bytes, is zeroed."""
        if not len(starts):
            return cls(starts, np.zeros(0, HEADER_DTYPE), np.zeros(0, np.int64))
        rows: np.ndarray = raw[starts[:, None] + _HEAD_SPAN].view(HEADER_DTYPE)[:, 0]
        old = rows["version"] == V2
        topic_at = np.full(len(starts), HEADER_SIZE, dtype=np.int64)
        if np.count_nonzero(old):
            rows["first_hi"][old] = 0
            rows["first_lo"][old] = 0
            topic_at[old] -= ID_SIZE
        return cls(starts, rows, topic_at)

    def __len__(self) -> int:
        return len(self.starts)

    def field(self, name: str) -> I64:
        out: I64 = self.rows[name].astype(np.int64)
        return out

    def corrupted(self, i: int, what: str) -> RecordCorrupted:
        """The error for record ``i``: what it has that does not hold together, and where."""
        return record_fault(int(self.starts[i]), what)

    def first_id(self, record: int) -> bytes | None:
        """Record ``record``'s first client id (16 bytes); None when it has none (version 2)."""
        hi, lo = int(self.rows["first_hi"][record]), int(self.rows["first_lo"][record])  # zero for version 2
        return (hi << 64 | lo).to_bytes(16, "big") if hi or lo else None


def record_starts(buf: bytes | memoryview) -> list[int]:
    """Where each record of ``buf`` starts, walking the chain of sizes (only magic and size
    are checked here)."""
    starts: list[int] = []
    append = starts.append
    unpack = PREFIX.unpack_from
    pos, end = 0, len(buf)
    try:
        while pos < end:
            total, magic = unpack(buf, pos)
            if magic != BATCH_MAGIC or total < HEADER_SIZE or pos + total > end:
                what = f"magic 0x{magic:08X}" if magic != BATCH_MAGIC else f"size {total}"
                raise RecordCorrupted(f"bad record header at byte {pos} ({what})", pos)
            append(pos)
            pos += total
    except struct.error:
        raise RecordCorrupted(f"truncated record header at byte {pos}", pos) from None
    return starts


def read_heads(
    buf: bytes | memoryview, *, verify: bool = True, max_section: int = MAX_SECTION, small: int = SMALL_RECORDS
) -> Heads:
    """The records' headers, checked: version, sizes, count and (with ``verify``) both CRCs;
    at most ``small`` records' fields in Python (0: always with numpy)."""
    starts = np.asarray(record_starts(buf), dtype=np.int64)
    heads = Heads.of(np.frombuffer(buf, dtype=np.uint8), starts)
    rows = heads.rows
    if verify:  # CRCs first: a damaged byte is damage, whatever field it landed in
        fields = (rows["total"].tolist(), rows["header_crc"].tolist(), rows["body_crc"].tolist())
        check_crcs(buf, heads.starts.tolist(), *fields)
    if len(heads) <= small:
        check_fields(rows.tolist(), heads.topic_at.tolist(), heads.starts.tolist(), max_section)
    else:
        _check_fields(heads, max_section)
    return heads


def _check_fields(heads: Heads, max_section: int) -> None:
    rows = heads.rows
    bad_version = (rows["version"] != VERSION) & (rows["version"] != V2)
    if np.count_nonzero(bad_version):
        i = int(np.argmax(bad_version))
        raise heads.corrupted(i, f"version {rows['version'][i]} (this reader knows {V2} and {VERSION})")
    count = heads.field("count")
    bad_count = (count < 1) | (count > MAX_COUNT)
    if np.count_nonzero(bad_count):
        i = int(np.argmax(bad_count))
        raise heads.corrupted(i, f"a count of {count[i]}")
    room = heads.field("total") - heads.topic_at - heads.field("topic_len")
    plain = (heads.field("attributes") & COMPRESSION_MASK) == NONE
    size = heads.field("section_size")
    over = size > max_section
    if np.count_nonzero(over):
        i = int(np.argmax(over))
        raise heads.corrupted(i, f"a message section of {size[i]} bytes, over the limit of {max_section} bytes")
    too_short = (room < 0) | (plain & (room != size)) | (size < 13 * count + 12)
    if np.count_nonzero(too_short):
        i = int(np.argmax(too_short))
        raise heads.corrupted(i, "sizes that do not add up (topic, section and record size disagree)")


def check_record(buf: bytes | memoryview, pos: int, limit: int) -> int:
    """Check the record at ``pos`` (header and both CRCs, not its message section); return
    its total size or raise RecordCorrupted. For walkers of the log (recovery, the scrub)."""
    if limit - pos < HEADER_SIZE:
        raise RecordCorrupted(f"truncated record header at {pos}", pos)
    total, magic = PREFIX.unpack_from(buf, pos)
    if magic != BATCH_MAGIC:
        raise RecordCorrupted(f"bad magic 0x{magic:08X} at {pos}", pos)
    if total < HEADER_SIZE or pos + total > limit:
        raise RecordCorrupted(f"impossible record size {total} at {pos}", pos)
    head = HEADER.unpack_from(buf, pos)
    view = memoryview(buf)
    if zlib.crc32(view[pos + BODY_AT : pos + total]) != head[F_BODY_CRC]:
        raise RecordCorrupted(f"body CRC mismatch in record at {pos}", pos)
    if zlib.crc32(view[pos + BROKER_AT : pos + BROKER_END]) != head[F_HEADER_CRC]:
        raise RecordCorrupted(f"header CRC mismatch in record at {pos}", pos)
    if head[F_VERSION] not in VERSIONS:  # intact, but of a format this broker does not know
        raise RecordCorrupted(f"record version {head[F_VERSION]} at {pos} (this broker knows {V2} and {VERSION})", pos)
    return int(total)
