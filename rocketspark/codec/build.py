"""Building batch records: from messages (the producer), from Arrow columns (the Spark sink),
and the broker's stamp of the fields it assigns.

Every function here lays bytes out in the layout of :mod:`rocketspark.codec.layout`; lengths
and offsets are computed with numpy over whole columns, and the data of each column is joined
once, in C.
"""

from __future__ import annotations

import struct
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate, repeat
from operator import attrgetter, is_not
from typing import Final

import numpy as np
import numpy.typing as npt

from rocketspark.codec import compression, ids
from rocketspark.codec.columns import decode
from rocketspark.codec.ids import MIN_BYTES_PER_MESSAGE
from rocketspark.codec.layout import (
    BATCH_MAGIC,
    BODY_AT,
    BROKER_AT,
    BROKER_END,
    BROKER_FIELDS,
    COMPRESSION_MASK,
    F_ATTRIBUTES,
    F_BODY_CRC,
    F_FIRST_ID,
    F_MAGIC,
    F_TAG_SUMMARY,
    F_VERSION,
    HAS_TAG,
    HEADER,
    HEADER_SIZE,
    MAX_TAG_BYTES,
    NONE,
    PREFIX,
    PRODUCER_FIELDS,
    VERSION,
    head_size,
    summary_of,
    tag_hash,
)
from rocketspark.codec.survey import Survey
from rocketspark.protocol.packing import packer
from rocketspark.protocol.properties import UNIQ_KEY
from rocketspark.protocol.types import Message

_UNSTAMPED_FIELDS = BROKER_FIELDS.pack(0, 0, 0, 0, 0)  # a sent record's broker fields are zero
_UNSTAMPED_CRC = zlib.crc32(_UNSTAMPED_FIELDS)


@dataclass(frozen=True, slots=True)
class Idempotence:
    """Who sends a batch and where it falls in that producer's numbering of one queue."""

    producer_id: int  # non-zero
    epoch: int
    base_sequence: int


@dataclass(init=False)
class Section:
    """A message section, uncompressed, with what the header says about it. Its ``__init__``
    is written out (as ``sent.SentBatch``'s is): compiled, a native constructor."""

    data: Final[bytes]
    count: Final[int]
    tag_summary: Final[int]

    def __init__(self, data: bytes, count: int, tag_summary: int) -> None:
        self.data, self.count, self.tag_summary = data, count, tag_summary


def pack_ext(keys: Sequence[str], properties: dict[str, str]) -> bytes:
    """A message's keys and properties as stored: empty when it has neither."""
    if not (keys or properties):
        return b""
    packed: bytes = packer().pack([list(keys), properties])
    return packed


def _offsets(lengths: npt.NDArray[np.int64]) -> npt.NDArray[np.uint32]:
    out = np.zeros(len(lengths) + 1, dtype="<u4")
    np.cumsum(lengths, out=out[1:])
    return out


def build_section(
    bodies: Sequence[bytes], tags: Sequence[str | None] | None = None, exts: Sequence[bytes] | None = None
) -> Section:
    """The columnar section of messages given as equal-length columns; no ``tags`` or
    ``exts`` column means none has any (then nothing is done per message). A few messages
    (``SMALL_SECTION``: one send of a service) are laid out with ``struct``, many with numpy
    (its set-up costs more than a few messages do); both give the same bytes."""
    n = len(bodies)
    items: Sequence[object] = bodies  # compiled, an item read as bytes is checked to be one
    only = items[0] if n == 1 and tags is None and not (exts and exts[0]) else None
    if isinstance(only, bytes):  # a service's one plain message (any other buffer: below)
        return Section(_ONE_PLAIN.pack(0, len(only)) + only, 1, 0)
    encoded, has_tag, summary = None, None, 0
    if tags is not None and any(t is not None for t in tags):
        encoded = [b"" if t is None else t.encode() for t in tags]
        if max(map(len, encoded)) > MAX_TAG_BYTES:
            raise ValueError(f"a tag is limited to {MAX_TAG_BYTES} bytes of UTF-8")
        summary = summary_of({tag_hash(t) for t in set(encoded) if t})
        if n <= SMALL_SECTION:
            flags = bytes(HAS_TAG if t is not None else 0 for t in tags)
            return Section(_small_section(bodies, encoded, flags, exts), n, summary)
        has_tag = np.fromiter((t is not None for t in tags), dtype=np.uint8, count=n)
    elif n <= SMALL_SECTION:
        return Section(_small_section(bodies, None, bytes(n), exts), n, 0)
    return Section(
        join_section(
            np.fromiter(map(len, bodies), dtype=np.int64, count=n),
            b"".join(bodies),
            None if encoded is None else np.fromiter(map(len, encoded), dtype=np.int64, count=n),
            b"" if encoded is None else b"".join(encoded),
            np.fromiter(map(len, exts), dtype=np.int64, count=n) if exts and any(exts) else None,
            b"".join(exts) if exts else b"",
            has_tag,
        ),
        n,
        summary,
    )


SMALL_SECTION: Final = 16
_OFFSETS: Final = {n: struct.Struct(f"<{n + 1}I") for n in range(1, SMALL_SECTION + 1)}
# ``_small_section``'s layout of one message with no tag and no keys or properties: its body's
# offsets, then zeros (the tags' and the extras' offsets, its flag byte), then the body
_ONE_PLAIN: Final = struct.Struct("<II17x")


def _small_section(
    bodies: Sequence[bytes], tags: list[bytes] | None, flags: bytes, exts: Sequence[bytes] | None
) -> bytes:
    """``join_section`` of a few messages, with plain integers."""
    pack = _OFFSETS[len(bodies)].pack
    zeros = bytes(4 * (len(bodies) + 1))
    return b"".join(
        (
            pack(0, *accumulate(map(len, bodies))),
            zeros if tags is None else pack(0, *accumulate(map(len, tags))),
            zeros if not exts or not any(exts) else pack(0, *accumulate(map(len, exts))),
            flags,
            *bodies,
            *(tags or ()),
            *(exts or ()),
        )
    )


def join_section(
    body_lengths: npt.NDArray[np.int64],
    body_data: bytes | memoryview,
    tag_lengths: npt.NDArray[np.int64] | None,
    tag_data: bytes | memoryview,
    ext_lengths: npt.NDArray[np.int64] | None,
    ext_data: bytes | memoryview,
    has_tag: npt.NDArray[np.uint8] | None,
) -> bytes:
    n = len(body_lengths)
    zeros = np.zeros(n + 1, dtype="<u4")
    parts = [
        _offsets(body_lengths).tobytes(),
        zeros.tobytes() if tag_lengths is None else _offsets(tag_lengths).tobytes(),
        zeros.tobytes() if ext_lengths is None else _offsets(ext_lengths).tobytes(),
        bytes(n) if has_tag is None else (has_tag & HAS_TAG).astype(np.uint8).tobytes(),
        body_data,
        tag_data,
        ext_data,
    ]
    return b"".join(parts)


_CRC: Final = struct.Struct(">I")  # a header's CRCs: the header CRC before the broker's fields, the body CRC after
assert PREFIX.size + _CRC.size == BROKER_AT and BROKER_END + _CRC.size == BODY_AT
_UNSTAMPED_BROKER_PART: Final = _CRC.pack(_UNSTAMPED_CRC) + _UNSTAMPED_FIELDS  # after a sent record's prefix


def encode_batch(
    topic: bytes,
    section: Section,
    *,
    compression_kind: int = NONE,
    idempotence: Idempotence | None = None,
    born_ms: int | None = None,
    first_id: bytes | None = None,
) -> bytes:
    """A whole batch record with the broker's fields zero, as a producer sends it. Its messages'
    client ids start at ``first_id`` (16 bytes; default: minted by this process's
    ``ids.mint``; ``ids.NO_ID``: none, the broker mints them)."""
    packed = compression.compress(compression_kind, section.data)
    if compression_kind != NONE and HEADER_SIZE + len(topic) + len(packed) < section.count * MIN_BYTES_PER_MESSAGE:
        compression_kind, packed = NONE, section.data  # the broker refuses it: offset ids must stay inside the batch
    born = int(time.time() * 1000) if born_ms is None else born_ms
    pid, epoch, seq = (
        (0, 0, 0) if idempotence is None else (idempotence.producer_id, idempotence.epoch, idempotence.base_sequence)
    )
    producer = PRODUCER_FIELDS.pack(
        VERSION,
        compression_kind,
        len(topic),
        section.count,
        born,
        pid,
        epoch,
        seq,
        section.tag_summary,
        len(section.data),
        ids.mint(section.count) if first_id is None else first_id,
    )
    body_crc = zlib.crc32(packed, zlib.crc32(topic, zlib.crc32(producer)))
    total = HEADER_SIZE + len(topic) + len(packed)
    # the header as its parts: prefix, the unstamped broker part and its CRC, the body CRC, the producer's
    prefix = PREFIX.pack(total, BATCH_MAGIC)
    return b"".join((prefix, _UNSTAMPED_BROKER_PART, _CRC.pack(body_crc), producer, topic, packed))


def stamped_head(
    record: bytes | memoryview, queue_id: int, base_offset: int, commitlog_offset: int, store_ms: int
) -> bytes:
    """The first ``BODY_AT`` bytes of ``record`` with the broker's fields filled in and their
    CRC: the broker appends this, then ``record[BODY_AT:]`` unchanged."""
    fields = BROKER_FIELDS.pack(queue_id, base_offset, commitlog_offset, store_ms, 0)
    # the prefix (size, magic), the header CRC (over the broker's fields), the fields, the body CRC
    return b"".join((record[: PREFIX.size], _CRC.pack(zlib.crc32(fields)), fields, record[BROKER_END:BODY_AT]))


def with_first_id(record: bytes | memoryview, first_id: bytes) -> bytes:
    """``record`` (one batch, as sent, of either version) as a version-3 record whose messages'
    client ids start at ``first_id``: what a broker stores of a send that brought no ids. Its
    header is laid out again and the body CRC computed anew (the id lies under it), once per
    record: only sends without ids pay it."""
    head = HEADER.unpack_from(record, 0)
    at = head_size(int(head[F_VERSION]))
    producer = PRODUCER_FIELDS.pack(VERSION, *head[F_ATTRIBUTES:F_FIRST_ID], first_id)
    rest = memoryview(record)[at:]
    body_crc = zlib.crc32(rest, zlib.crc32(producer))
    total = HEADER_SIZE + len(rest)
    return b"".join((HEADER.pack(total, *head[F_MAGIC:F_BODY_CRC], body_crc, *PRODUCER_FIELDS.unpack(producer)), rest))


def drop_front(record: bytes, k: int) -> bytes:
    """``record`` (one batch, as sent) without its first ``k`` messages: the part of an
    idempotent resend the broker had not stored yet. Same producer, epoch and compression;
    its base sequence and first client id move on by ``k``."""
    columns = decode(record)
    row = columns.heads.rows[0]
    n = len(columns) - k
    raw = memoryview(columns.data if isinstance(columns.data, bytes) else bytes(columns.data))

    def region(at: npt.NDArray[np.int64], length: npt.NDArray[np.int64]) -> memoryview:
        return raw[int(at[k]) : int(at[-1] + length[-1])]

    has_tag = columns.has_tag[k:].astype(np.uint8)
    section = join_section(
        columns.body_len[k:],
        region(columns.body_at, columns.body_len),
        columns.tag_len[k:],
        region(columns.tag_at, columns.tag_len),
        columns.ext_len[k:],
        region(columns.ext_at, columns.ext_len),
        has_tag,
    )
    at = int(columns.heads.topic_at[0])
    topic = bytes(record[at : at + int(row["topic_len"])])
    idem = Idempotence(int(row["producer_id"]), int(row["producer_epoch"]), int(row["base_sequence"]) + k)
    first = columns.heads.first_id(0)
    return encode_batch(
        topic,
        Section(section, n, columns.take(np.arange(len(columns)) >= k).tag_summary()),
        compression_kind=int(row["attributes"]) & COMPRESSION_MASK,
        idempotence=idem if idem.producer_id else None,
        born_ms=int(row["born_ms"]),
        first_id=ids.NO_ID if first is None else bytes.fromhex(ids.client_id_at(first, k)),
    )


def tag_summary_of(record: bytes) -> int:
    """The tag summary in a record's header."""
    return int(HEADER.unpack_from(record)[F_TAG_SUMMARY])


def encode_messages(
    topic: str,
    messages: Sequence[Message],
    *,
    compression_kind: int = NONE,
    idempotence: Idempotence | None = None,
    born_ms: int | None = None,
    first_id: bytes | None = None,
) -> bytes:
    """One batch record of ``messages`` (all of ``topic``), as a producer sends it; ``born_ms``:
    when they were made (default: now); ``first_id``: their first client id (default: minted;
    see ``encode_batch``). A message with a ``UNIQ_KEY`` property keeps that id."""
    return encode_sent(
        topic, messages, compression_kind=compression_kind, idempotence=idempotence, born_ms=born_ms, first_id=first_id
    )[0]


def encode_sent(
    topic: str,
    messages: Sequence[Message],
    *,
    compression_kind: int = NONE,
    idempotence: Idempotence | None = None,
    born_ms: int | None = None,
    first_id: bytes | None = None,
    plain: bool | None = None,
) -> tuple[bytes, dict[int, str] | None]:
    """``encode_messages``, and the messages that carry a client id of their own (a ``UNIQ_KEY``
    property, which they keep), by place (None when none does): what a producer needs to tell
    its messages' ids, looked for only among messages with properties. ``plain``: whether the
    messages are bodies alone, when the caller knows (``survey``); else it is looked at here."""
    bodies = list(map(BODY, messages))
    own = None
    if is_plain(messages) if plain is None else plain:  # bodies alone: no per-message Python
        section = build_section(bodies)
    else:
        exts = [pack_ext(m.keys, m.properties) if m.keys or m.properties else b"" for m in messages]
        section = build_section(bodies, [m.tags for m in messages], exts)
        own = {i: m.properties[UNIQ_KEY] for i, m in enumerate(messages) if UNIQ_KEY in m.properties} or None
    record = encode_batch(
        topic.encode(),
        section,
        compression_kind=compression_kind,
        idempotence=idempotence,
        born_ms=born_ms,
        first_id=first_id,
    )
    return record, own


BODY = attrgetter("body")  # a message's attributes, read by C loops over many messages
_TAGS, _KEYS, _PROPERTIES = attrgetter("tags"), attrgetter("keys"), attrgetter("properties")


def is_plain(messages: Sequence[Message]) -> bool:
    """No message has a tag, keys or properties: the batch is its bodies alone. An empty tag
    is a tag (the format keeps it apart from none, as a batch of mixed tags always did)."""
    if len(messages) == 1:  # a single send
        only = messages[0]
        return only.tags is None and not (only.keys or only.properties)
    return not (
        any(map(is_not, map(_TAGS, messages), repeat(None)))
        or any(map(_KEYS, messages))
        or any(map(_PROPERTIES, messages))
    )


PER_MESSAGE_BYTES: Final = 13  # a message's three end offsets (body, tag, extras) and its flag byte


def message_size(message: Message) -> int:
    """The bytes a message takes in a batch's section: its body, tag, keys and properties, and
    its ``PER_MESSAGE_BYTES`` of offsets and flags (for splitting sends by size)."""
    tag = len(message.tags.encode()) if message.tags else 0
    ext = len(pack_ext(message.keys, message.properties)) if message.keys or message.properties else 0
    return len(message.body) + tag + ext + PER_MESSAGE_BYTES


def record_overhead(topic: bytes) -> int:
    """The bytes of a batch record that are not its messages: header, topic, the offsets' ends."""
    return HEADER_SIZE + len(topic) + 12


def chunk_messages(messages: Sequence[Message], max_bytes: int, seen: Survey | None = None) -> list[Sequence[Message]]:
    """Messages, in order, in runs whose batch records take at most ``max_bytes`` (a larger
    message goes alone). ``seen``: their ``survey``, when the caller made one."""
    if messages:
        max_bytes = max(1, max_bytes - record_overhead(messages[0].topic.encode()))
    if seen is not None and seen.plain and seen.body_bytes + PER_MESSAGE_BYTES * len(messages) <= max_bytes:
        return [messages]  # the common case, known without looking at the messages again
    if is_plain(messages) if seen is None else seen.plain:  # sizes from bodies alone
        sizes = np.fromiter(map(len, map(BODY, messages)), dtype=np.int64, count=len(messages)) + PER_MESSAGE_BYTES
        if int(sizes.sum()) <= max_bytes:
            return [messages]
    else:
        sizes = np.fromiter(map(message_size, messages), dtype=np.int64, count=len(messages))
    chunks: list[Sequence[Message]] = []
    ends = np.cumsum(sizes)
    start = 0
    while start < len(messages):
        floor = int(ends[start - 1]) if start else 0
        stop = max(start + 1, int(np.searchsorted(ends, floor + max_bytes, side="right")))
        chunks.append(messages[start:stop])
        start = stop
    return chunks
