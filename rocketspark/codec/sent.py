"""A sent batch record as the broker's check sees it: what it learns of one (``SentBatch``), how
it refuses one (``BatchRefused``, ``BodyTooLarge``), and the checks every path of
:mod:`rocketspark.codec.ingest` that reads a whole uncompressed record begins and ends with:
its frame (both CRCs, its version, its count, its sizes), its offsets' ends, and the rule for
messages that are bodies alone.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any, Final

from rocketspark.codec.layout import (
    BODY_AT,
    BROKER_AT,
    BROKER_END,
    F_BASE_SEQUENCE,
    F_BODY_CRC,
    F_COUNT,
    F_HEADER_CRC,
    F_PRODUCER_EPOCH,
    F_PRODUCER_ID,
    F_SECTION_SIZE,
    F_TAG_SUMMARY,
    F_TOPIC_LEN,
    F_TOTAL,
    F_VERSION,
    MAX_COUNT,
    V2,
    VERSION,
    VERSIONS,
    RecordCorrupted,
    first_id_of,
    head_size,
    summary_of,
)


class BatchRefused(ValueError):
    """A sent batch record is malformed; the message says what and where."""


class BodyTooLarge(ValueError):
    """A message body is over the broker's limit."""

    def __init__(self, index: int, size: int, limit: int) -> None:
        super().__init__(f"message {index} of the batch has a {size}-byte body, over the limit of {limit} bytes")
        self.index, self.size, self.limit = index, size, limit


@dataclass(init=False)
class SentBatch:
    """What the broker needs of a checked batch: its size, tags, who sent it and its first
    client id (None: the producer gave none, or sent the previous version: the broker mints
    them, ``build.with_first_id``). Its ``__init__`` is written out, as ``store.PutResult``'s
    is: compiled, a native constructor instead of a generated one run as Python once a send."""

    count: Final[int]
    tag_summary: Final[int]
    producer_id: Final[int]
    producer_epoch: Final[int]
    base_sequence: Final[int]
    topic: Final[bytes]
    first_id: Final[bytes | None]
    kinds: Final[tuple[tuple[str, int], ...]]  # messages of a type other than normal, by type (metrics)

    def __init__(
        self,
        count: int,
        tag_summary: int,
        producer_id: int,
        producer_epoch: int,
        base_sequence: int,
        topic: bytes,
        first_id: bytes | None = None,
        kinds: tuple[tuple[str, int], ...] = (),
    ) -> None:
        self.count = count
        self.tag_summary = tag_summary
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.topic = topic
        self.first_id = first_id
        self.kinds = kinds


def framed(record: bytes, head: tuple[Any, ...], max_section: int) -> tuple[int, int]:
    """The checks of one whole uncompressed record before its messages: both CRCs, its version,
    its count, its sizes; where its topic and its message section start."""
    total, version, topic_len, count, size = (
        head[F_TOTAL],
        head[F_VERSION],
        head[F_TOPIC_LEN],
        head[F_COUNT],
        head[F_SECTION_SIZE],
    )
    view = memoryview(record)
    if zlib.crc32(view[BODY_AT:total]) != head[F_BODY_CRC]:
        raise RecordCorrupted("body CRC mismatch in the record at byte 0", 0)
    if zlib.crc32(view[BROKER_AT:BROKER_END]) != head[F_HEADER_CRC]:
        raise RecordCorrupted("header CRC mismatch in the record at byte 0", 0)
    if version not in VERSIONS:
        raise RecordCorrupted(f"the record at byte 0 has version {version} (this reader knows {V2} and {VERSION})", 0)
    if not 1 <= count <= MAX_COUNT:  # a record of bodies alone comes here with any count
        raise RecordCorrupted(f"the record at byte 0 has a count of {count}", 0)
    if size > max_section:
        raise RecordCorrupted(
            f"the record at byte 0 has a message section of {size} bytes, over the limit of {max_section} bytes", 0
        )
    topic_at = head_size(version)
    sec = topic_at + topic_len
    if total - sec != size or size < 13 * count + 12:
        raise RecordCorrupted(
            "the record at byte 0 has sizes that do not add up (topic, section and record size disagree)", 0
        )
    return topic_at, sec


def check_ends(firsts: int, lasts: int, data_at: int, total: int) -> None:
    """The section's three offset columns start at 0 (``firsts``: their first values, summed)
    and their ends (``lasts``, summed) reach the record's end."""
    if firsts or data_at + lasts != total:
        raise RecordCorrupted("the record at byte 0 has a message section whose offsets do not add up to its size", 0)


def sent_batch(record: bytes, head: tuple[Any, ...], topic_at: int, sec: int, kinds: dict[str, int]) -> SentBatch:
    """What a record that passed its checks tells: its header's fields, its topic, ``kinds``."""
    return SentBatch(
        head[F_COUNT],
        head[F_TAG_SUMMARY],
        head[F_PRODUCER_ID],
        head[F_PRODUCER_EPOCH],
        head[F_BASE_SEQUENCE],
        bytes(record[topic_at:sec]),
        first_id_of(head),
        tuple(kinds.items()),
    )


def check_bodies(bodies: tuple[int, ...], tag_summary: int, max_body: int) -> None:
    """The checks left for a small record of bodies alone once its tag and extras offsets and
    flags are all 0 (no tag to hash, no extras to decode), in the order of ``ingest``'s message-by-message check: the
    body offsets go forwards, the tag summary is that of no tag, then the first body over
    ``max_body``."""
    over = -1
    for i in range(len(bodies) - 1):
        size = bodies[i + 1] - bodies[i]
        if size < 0:
            raise RecordCorrupted("the record at byte 0 has message offsets that go backwards", 0)
        if size > max_body and over < 0:
            over = i
    if tag_summary != 0:
        raise RecordCorrupted(f"the tag summary does not match the batch's tags (expected {summary_of(set()):#x})", 0)
    if over >= 0:
        raise BodyTooLarge(over, bodies[over + 1] - bodies[over], max_body)
