"""The message record: how one stored message is laid out, on disk and in pull responses.

The broker appends records to its commit log and answers a pull with the stored bytes of the
requested records, concatenated, unchanged. The client decodes them here and checks each
record's CRC, so corruption anywhere between the disk and the consumer is caught.

Byte layout (big-endian, like RocketMQ's commit log)::

     0  u32  total_size        whole record, this field included
     4  u32  magic             RECORD_MAGIC; BLANK_MAGIC pads the end of a commit-log segment
     8  u32  crc               CRC32 of bytes [12, total_size)
    12  u32  queue_id          physical queue id on the storing broker
    16  u64  queue_offset      index of the message in its consume queue
    24  u64  commitlog_offset  physical offset of this record in the commit log
    32  u64  born_ms           producer clock, ms since the epoch
    40  u64  store_ms          broker clock when stored, ms since the epoch
    48  u32  sys_flag          reserved bits, 0 today
    52  u16  topic_len
    54  ...  topic             UTF-8, topic_len bytes
    ...  ...  payload          the message as its producer encoded it (below)

The payload is fixed-layout, so that a reader can slice every field without a parser (the
Spark source builds Arrow columns from many records at once)::

     0  u32  body_len
     4  u16  tag_len       NO_TAG (0xFFFF) when the message has no tag
     6  u32  ext_len       0 when the message has neither keys nor properties
    10  ...  body
    ...  ...  tag           UTF-8
    ...  ...  ext           msgpack [keys: [str], properties: {str: str}]

A blank record is just ``total_size`` and ``BLANK_MAGIC``: the rest of its bytes are padding.
"""

from __future__ import annotations

import struct
import zlib
from typing import Final

import msgpack
import numpy as np

HEADER: Final = struct.Struct(">IIIIQQQQIH")
HEADER_SIZE: Final = HEADER.size  # 54
PREFIX: Final = struct.Struct(">III")  # total_size, magic, crc
REST_HEADER: Final = struct.Struct(">IQQQQIH")  # the header after the crc field
RECORD_MAGIC: Final = 0x52534D31  # "RSM1"
BLANK_MAGIC: Final = 0xCBD43194  # RocketMQ's BLANK_MAGIC_CODE
BLANK_HEADER: Final = struct.Struct(">II")
MIN_BLANK_SIZE: Final = BLANK_HEADER.size

PAYLOAD_HEAD: Final = struct.Struct(">IHI")
PAYLOAD_HEAD_SIZE: Final = PAYLOAD_HEAD.size  # 10
NO_TAG: Final = 0xFFFF
MAX_TAG_BYTES: Final = 0xFFFE
_pack_ext = msgpack.Packer(use_bin_type=True).pack
_pack_head = PAYLOAD_HEAD.pack

# The same two layouts as numpy dtypes, for code that reads or writes a field of many records
# at once (the Spark source gathers headers, the sink builds payload heads): one row per record.
HEADER_DTYPE: Final = np.dtype(
    [
        ("total", ">u4"),
        ("magic", ">u4"),
        ("crc", ">u4"),
        ("queue_id", ">u4"),
        ("queue_offset", ">u8"),
        ("commitlog_offset", ">u8"),
        ("born_ms", ">u8"),
        ("store_ms", ">u8"),
        ("sys_flag", ">u4"),
        ("topic_len", ">u2"),
    ]
)
PAYLOAD_HEAD_DTYPE: Final = np.dtype([("body_len", ">u4"), ("tag_len", ">u2"), ("ext_len", ">u4")])
assert HEADER_DTYPE.itemsize == HEADER.size and PAYLOAD_HEAD_DTYPE.itemsize == PAYLOAD_HEAD.size


class RecordCorrupted(ValueError):
    """A record failed its magic, size or CRC check; ``position`` is where, in its buffer."""

    def __init__(self, message: str, position: int) -> None:
        super().__init__(message)
        self.position = position


def encode_payload(body: bytes, tags: str | None, keys: list[str], properties: dict[str, str]) -> bytes:
    tag = b"" if tags is None else tags.encode()
    if len(tag) > MAX_TAG_BYTES:
        raise ValueError(f"a tag is limited to {MAX_TAG_BYTES} bytes of UTF-8, got {len(tag)}")
    ext = _pack_ext([keys, properties]) if keys or properties else b""
    return _pack_head(len(body), NO_TAG if tags is None else len(tag), len(ext)) + body + tag + ext


def payload_tag(buf: bytes | memoryview, pos: int, end: int) -> tuple[bytes | None, int]:
    """The tag (its UTF-8 bytes; None when untagged) and body length of the payload in
    ``buf[pos:end]``, read from the payload's header: the body is never copied.

    Raises ValueError if the payload is shorter than its header or its lengths do not add up.
    """
    if end - pos < PAYLOAD_HEAD_SIZE:
        raise ValueError(f"payload of {end - pos} bytes is shorter than its {PAYLOAD_HEAD_SIZE}-byte header")
    body_len, tag_len, ext_len = PAYLOAD_HEAD.unpack_from(buf, pos)
    tag_start = pos + PAYLOAD_HEAD_SIZE + body_len
    tag_stop = tag_start + (0 if tag_len == NO_TAG else tag_len)
    if tag_stop + ext_len != end:
        raise ValueError(f"payload lengths ({body_len}, {tag_len}, {ext_len}) do not add up to its size")
    return (None if tag_len == NO_TAG else bytes(buf[tag_start:tag_stop])), body_len


def tag_hash(tag: bytes | None) -> int:
    """The consume-queue tag code: CRC32 of the tag's UTF-8 bytes, 0 when untagged or empty
    (the same value as ``broker.store.recovery.tag_hash`` of the tag as a string)."""
    return zlib.crc32(tag) if tag else 0


def encode_record(
    *,
    topic_bytes: bytes,
    payload: bytes,
    queue_id: int,
    queue_offset: int,
    commitlog_offset: int,
    born_ms: int,
    store_ms: int,
    sys_flag: int = 0,
) -> bytes:
    """Frame one message. The caller has validated sizes; this only lays out bytes."""
    rest = (
        REST_HEADER.pack(queue_id, queue_offset, commitlog_offset, born_ms, store_ms, sys_flag, len(topic_bytes))
        + topic_bytes
        + payload
    )
    total = 12 + len(rest)
    return PREFIX.pack(total, RECORD_MAGIC, zlib.crc32(rest)) + rest


def encode_blank(size: int) -> bytes:
    """Padding that fills the end of a segment when the next record does not fit."""
    return BLANK_HEADER.pack(size, BLANK_MAGIC) + bytes(size - MIN_BLANK_SIZE)


def msg_id(broker_name: str, commitlog_offset: int) -> str:
    """RocketMQ-style offset message id: who stored it and where. Computable, so never stored."""
    return f"{zlib.crc32(broker_name.encode()):08X}{commitlog_offset:016X}"


def check_record(buf: bytes | memoryview, pos: int, limit: int) -> int:
    """Validate the record at ``pos``; return its total size or raise :class:`RecordCorrupted`."""
    if limit - pos < HEADER_SIZE:
        raise RecordCorrupted(f"truncated record header at {pos}", pos)
    total, magic, crc = PREFIX.unpack_from(buf, pos)
    if magic != RECORD_MAGIC:
        raise RecordCorrupted(f"bad magic 0x{magic:08X} at {pos}", pos)
    if total < HEADER_SIZE or pos + total > limit:
        raise RecordCorrupted(f"impossible record size {total} at {pos}", pos)
    if zlib.crc32(memoryview(buf)[pos + 12 : pos + total]) != crc:
        raise RecordCorrupted(f"CRC mismatch in record at {pos}", pos)
    return int(total)
