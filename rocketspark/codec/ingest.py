"""The broker's check of a batch record a producer sent: once per send, never per message in
Python.

A record that would not decode for a consumer is refused here, so a broken producer cannot
poison a queue: its header and body CRC, every offset of its message section (numpy, over all
messages at once), its tags' UTF-8, the size of its largest body, and, for the few messages
that have any, their keys and properties.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgpack
import numpy as np

from rocketspark.codec.columns import Columns, check_tags_utf8, decode
from rocketspark.codec.layout import BODY_AT, HEADER_SIZE, PRODUCER_FIELDS, RecordCorrupted


class BatchRefused(ValueError):
    """A sent batch record is malformed; the message says what and where."""


class BodyTooLarge(ValueError):
    """A message body is over the broker's limit."""

    def __init__(self, index: int, size: int, limit: int) -> None:
        super().__init__(f"message {index} of the batch has a {size}-byte body, over the limit of {limit} bytes")
        self.index, self.size, self.limit = index, size, limit


@dataclass(frozen=True, slots=True)
class SentBatch:
    """What the broker needs of a checked batch: its size, tags and who sent it."""

    count: int
    tag_summary: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    topic: bytes


def check_sent(record: bytes, *, max_body: int, max_section: int) -> SentBatch:
    """Check one sent record; raise BatchRefused (malformed) or BodyTooLarge."""
    try:
        columns = decode(record, max_section=max_section)
        if len(columns.heads) != 1:
            raise BatchRefused(f"a send carries exactly one batch record, not {len(columns.heads)}")
        check_tags_utf8(columns)
        _check_exts(columns)
        _check_summary(columns)
    except RecordCorrupted as exc:
        raise BatchRefused(f"the batch record is malformed: {exc}") from None
    if len(columns) and int(columns.body_len.max()) > max_body:
        index = int(np.argmax(columns.body_len > max_body))
        raise BodyTooLarge(index, int(columns.body_len[index]), max_body)
    row = columns.heads.rows[0]
    tlen = int(row["topic_len"])
    return SentBatch(
        int(row["count"]),
        int(row["tag_summary"]),
        int(row["producer_id"]),
        int(row["producer_epoch"]),
        int(row["base_sequence"]),
        bytes(record[HEADER_SIZE : HEADER_SIZE + tlen]),
    )


def built_here(record: bytes) -> SentBatch:
    """A record this process's own encoder built (a broker's v2 endpoint sending to the broker
    it runs in, from fields it checked): its header read, its bytes not checked again."""
    _, _, topic_len, count, _, producer_id, epoch, base_sequence, summary, _ = PRODUCER_FIELDS.unpack_from(
        record, BODY_AT
    )
    return SentBatch(
        count, summary, producer_id, epoch, base_sequence, bytes(record[HEADER_SIZE : HEADER_SIZE + topic_len])
    )


def _check_exts(columns: Columns) -> None:
    """Keys and properties decode as ``[keys: [str], properties: {str: str}]``."""
    data = columns.data
    for at, length in zip(
        columns.ext_at[columns.ext_len > 0].tolist(), columns.ext_len[columns.ext_len > 0].tolist(), strict=True
    ):
        try:
            ext = msgpack.unpackb(data[at : at + length], raw=False)
        except Exception as exc:
            raise RecordCorrupted(f"message keys/properties are not valid msgpack ({type(exc).__name__})", at) from None
        if type(ext) is not list or len(ext) != 2 or type(ext[0]) is not list or type(ext[1]) is not dict:
            raise RecordCorrupted("message keys/properties must be [keys: array, properties: map]", at)
        keys, properties = ext
        if not all(type(k) is str for k in keys) or not all(
            type(k) is str and type(v) is str for k, v in properties.items()
        ):
            raise RecordCorrupted("message keys, property names and property values must be strings", at)


def _check_summary(columns: Columns) -> None:
    """The header's tag summary is the one its tags give: the broker's filter skips batches by
    it, so a wrong one would hide messages from filtered readers (and recovery re-reads it)."""
    expected = columns.tag_summary()
    if int(columns.heads.rows[0]["tag_summary"]) != expected:
        raise RecordCorrupted(f"the tag summary does not match the batch's tags (expected {expected:#x})", 0)
