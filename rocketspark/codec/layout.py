"""The batch record: how messages are laid out, on disk, on the wire and in pull responses.

One send of k messages to one queue is stored as one batch record (a single send is a batch
of one), as Kafka's record batch v2 and RocketMQ 5's inner batch do. The producer builds the
whole record; the broker checks it once (sizes, count, the body CRC), fills in the fields it
assigns and appends the bytes. A pull answers with whole records, as stored; the client
checks both CRCs and decodes every column at once (:mod:`rocketspark.codec.columns`), or, for a
few small records, field by field (:mod:`rocketspark.codec.few`).

Header (big-endian, fixed, ``HEADER_SIZE`` bytes)::

     0  u32  total_size        whole record, this field included
     4  u32  magic             BATCH_MAGIC; BLANK_MAGIC pads the end of a commit-log segment
     8  u32  header_crc        CRC32 of bytes [12, 44): the fields the broker assigns
    12  u32  queue_id          physical queue id on the storing broker     -+
    16  u64  base_offset       queue offset of the first message            | broker
    24  u64  commitlog_offset  physical offset of this record in the log    | assigns
    32  u64  store_ms          broker clock when stored, ms                 |
    40  u32  reserved          0                                           -+
    44  u32  body_crc          CRC32 of bytes [48, total_size)
    48  u8   version           VERSION (3)                                 -+
    49  u8   attributes        bits 0-1: compression (0 none, 1 zstd, 2 lz4)  |
    50  u16  topic_len                                                        |
    52  u32  count             messages in the batch, at least 1              | producer
    56  u64  born_ms           producer clock when the batch was built        | writes
    64  u64  producer_id       0: not idempotent                              |
    72  u32  producer_epoch                                                   |
    76  u32  base_sequence     sequence number of the first message           |
    80  u64  tag_summary       see below                                      |
    88  u32  section_size      size of the message section uncompressed      |
    92  u8[16] first_id        client id of the first message; all zero:    |
                               none given (the broker mints one)           -+
   108  ...  topic             UTF-8
    ...  ...  message section  compressed as a whole when attributes say so

``first_id`` is the batch's first client id (:mod:`rocketspark.codec.ids`): message ``i``'s id is
``first_id + i``, so no message carries an id of its own unless its properties hold a
``UNIQ_KEY`` (a foreign client's id, kept as it came). It lies under the body CRC: a broker that
mints ids for a record sent without them writes its header anew (``build.with_first_id``), once
per record, and only then. Records of version 2 (before client
ids) are the same without ``first_id``: their topic starts at byte 92 (``V2_HEADER_SIZE``).
They are still read everywhere (their messages' ids fall back to offset ids) and still
accepted from a producer, the broker then rewriting them as version 3 with ids it mints.
Every other field lies where it lay, so one numpy row type (``HEADER_DTYPE``, whose
``first_hi``/``first_lo`` a version-2 row must not be read for) serves both.

The message section is columnar, like an Arrow record batch (offsets, then data), so a
reader slices every message's body, tag and keys/properties with a few numpy operations and
hands bodies to Arrow without copying them (little-endian, as numpy and Arrow read)::

    u32[count + 1]  body offsets       into the bodies, from 0
    u32[count + 1]  tag offsets        into the tags, from 0
    u32[count + 1]  ext offsets        into the exts, from 0
    u8[count]       flags              bit 0: the message has a tag (an empty one included)
    ...             bodies             concatenated
    ...             tags               UTF-8, concatenated
    ...             exts               msgpack ``[keys: [str], properties: {str: str}]`` per
                                       message, empty when it has neither

The tag summary lets the broker skip whole batches under a tag filter: 0 when no message is
tagged; the tag's hash (``tag_hash``, below 2^32) when every message carries the same tag;
otherwise ``MIXED`` plus one bit per distinct tag hash (``hash % 63``), a Bloom filter that
may let a batch through that the client then filters message by message.

A blank record is just ``total_size`` and ``BLANK_MAGIC``: the rest of its bytes are padding.
A gap record is the same with ``GAP_MAGIC``: a damaged range recovery cut out of a segment.
"""

from __future__ import annotations

import struct
import zlib
from typing import Final

import numpy as np

VERSION: Final = 3
V2: Final = 2  # the format before client ids, still read
VERSIONS: Final = frozenset({V2, VERSION})
BATCH_MAGIC: Final = 0x52534232  # "RSB2"
BATCH_MAGIC_BYTES: Final = BATCH_MAGIC.to_bytes(4, "big")  # what a search for the next record looks for
BLANK_MAGIC: Final = 0xCBD43194  # RocketMQ's BLANK_MAGIC_CODE
GAP_MAGIC: Final = 0x47415021  # "GAP!": a region recovery cut out of the middle of a segment
FORMAT_1_MAGIC: Final = 0x52534D31  # "RSM1": a record of one message, before batch records
PREFIX: Final = struct.Struct(">II")  # total_size, magic: what every record, blank or not, starts with
MIN_BLANK_SIZE: Final = PREFIX.size

HEADER: Final = struct.Struct(">IIIIQQQIIBBHIQQIIQI16s")
HEADER_SIZE: Final[int] = HEADER.size  # 108
FIRST_ID_AT: Final = 92
V2_HEADER_SIZE: Final = FIRST_ID_AT  # a version-2 record's topic starts here
ID_SIZE: Final = HEADER_SIZE - V2_HEADER_SIZE
BROKER_FIELDS: Final = struct.Struct(">IQQQI")  # queue_id .. reserved, at BROKER_AT
BROKER_AT: Final = 12
BROKER_END: Final = BROKER_AT + BROKER_FIELDS.size  # 44
BODY_CRC_AT: Final = BROKER_END  # 44
BODY_AT: Final = BODY_CRC_AT + 4  # 48: where the body CRC starts covering
PRODUCER_FIELDS: Final = struct.Struct(">BBHIQQIIQI16s")  # version .. first_id, at BODY_AT
assert BODY_AT + PRODUCER_FIELDS.size == HEADER_SIZE
COUNT_AT: Final = BODY_AT + struct.calcsize(">BBH")  # 52: the message count, after version, attributes, topic_len
BORN_AT: Final = COUNT_AT + 4  # 56: born_ms

# Where each field lies in ``HEADER.unpack``'s tuple (a ``HEADER_DTYPE`` row's ``tolist()`` has
# the same first 19; the client id, F_FIRST_ID, is the tuple's alone), for code that reads
# records field by field. Every field but the reserved one (7) has its name.
F_TOTAL: Final = 0
F_MAGIC: Final = 1
F_HEADER_CRC: Final = 2
F_QUEUE_ID: Final = 3
F_BASE_OFFSET: Final = 4
F_LOG_OFFSET: Final = 5
F_STORE_MS: Final = 6
F_BODY_CRC: Final = 8
F_VERSION: Final = 9
F_ATTRIBUTES: Final = 10
F_TOPIC_LEN: Final = 11
F_COUNT: Final = 12
F_BORN_MS: Final = 13
F_PRODUCER_ID: Final = 14
F_PRODUCER_EPOCH: Final = 15
F_BASE_SEQUENCE: Final = 16
F_TAG_SUMMARY: Final = 17
F_SECTION_SIZE: Final = 18
F_FIRST_ID: Final = 19

COMPRESSION_MASK: Final = 0x03
NONE, ZSTD, LZ4 = 0, 1, 2
COMPRESSIONS: Final = {"none": NONE, "zstd": ZSTD, "lz4": LZ4}

MIXED: Final = 1 << 63
BLOOM_BITS: Final = 63
HAS_TAG: Final = 1

# Fixed limits: a count or size past them is damage, whatever the broker's configured limits.
MAX_COUNT: Final = 1 << 24
MAX_TAG_BYTES: Final = 0xFFFF

# The header as a numpy row, for code that reads a field of many records at once.
HEADER_DTYPE: Final = np.dtype(
    [
        ("total", ">u4"),
        ("magic", ">u4"),
        ("header_crc", ">u4"),
        ("queue_id", ">u4"),
        ("base_offset", ">u8"),
        ("commitlog_offset", ">u8"),
        ("store_ms", ">u8"),
        ("reserved", ">u4"),
        ("body_crc", ">u4"),
        ("version", "u1"),
        ("attributes", "u1"),
        ("topic_len", ">u2"),
        ("count", ">u4"),
        ("born_ms", ">u8"),
        ("producer_id", ">u8"),
        ("producer_epoch", ">u4"),
        ("base_sequence", ">u4"),
        ("tag_summary", ">u8"),
        ("section_size", ">u4"),
        ("first_hi", ">u8"),  # first_id as two big-endian halves (version 3 only)
        ("first_lo", ">u8"),
    ]
)
assert HEADER_DTYPE.itemsize == HEADER_SIZE


class RecordCorrupted(ValueError):
    """A record failed its magic, size or CRC check; ``position`` is where, in its buffer."""

    def __init__(self, message: str, position: int) -> None:
        super().__init__(message)
        self.position = position


def tag_hash(tag: bytes | None) -> int:
    """A tag's hash, as tag filters and summaries use it: CRC32 of its UTF-8 bytes, 0 when
    untagged or empty (an empty tag matches no filter)."""
    return zlib.crc32(tag) if tag else 0


def summary_of(hashes: set[int]) -> int:
    """The tag summary of a batch whose tagged messages have these (non-zero) tag hashes."""
    if not hashes:
        return 0
    if len(hashes) == 1:
        return next(iter(hashes))
    bloom = 0
    for h in hashes:
        bloom |= 1 << (h % BLOOM_BITS)
    return MIXED | bloom


def summary_matches(summary: int, wanted: frozenset[int]) -> bool:
    """Whether a batch with this tag summary may hold a message with one of the wanted tag
    hashes (never a false no; a mixed batch may be a false yes)."""
    if summary & MIXED:
        return any(summary >> (h % BLOOM_BITS) & 1 for h in wanted)
    return summary in wanted


def head_size(version: int) -> int:
    """Where the topic starts in a record of this version."""
    return V2_HEADER_SIZE if version == V2 else HEADER_SIZE


def first_id_of(head: tuple[object, ...]) -> bytes | None:
    """The first client id in a record's ``HEADER`` fields; None for a version-2 record or one
    whose producer gave none."""
    raw = head[F_FIRST_ID]
    return raw if head[F_VERSION] != V2 and isinstance(raw, bytes) and any(raw) else None


def encode_blank(size: int) -> bytes:
    """Padding that fills the end of a segment when the next record does not fit."""
    return PREFIX.pack(size, BLANK_MAGIC) + bytes(size - MIN_BLANK_SIZE)
