"""A few messages are decoded with ``struct`` (``columns._messages_few``, ``heads._check_fields_few``)
and many with numpy; both must give the same columns, or refuse with the same words, for any
buffer: sound ones of every shape, and thousands of damaged ones (a byte changed anywhere, its
CRCs not checked, so that the damage reaches the structural checks)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from rocketspark.codec.build import encode_messages
from rocketspark.codec.columns import SMALL_MESSAGES, Columns, decode
from rocketspark.codec.heads import SMALL_RECORDS
from rocketspark.codec.layout import LZ4, NONE, ZSTD, RecordCorrupted
from rocketspark.protocol.types import Message

FIELDS = ("batch", "index", "body_at", "body_len", "tag_at", "tag_len", "has_tag", "ext_at", "ext_len")


def sample_buffer(rng: random.Random, records: int, messages: int) -> bytes:
    """``records`` records of ``messages`` messages in all: tags, keys and properties mixed."""
    sizes = [1] * records
    for _ in range(messages - records):
        sizes[rng.randrange(records)] += 1
    parts = []
    for size in sizes:
        batch = [
            Message(
                "orders",
                rng.randbytes(rng.choice([0, 1, 7, 100])),
                tags=rng.choice([None, "", "A", "ünï"]),
                keys=rng.choice([[], ["k1"], ["k1", "k2"]]),
                properties=rng.choice([{}, {"p": "v"}]),
            )
            for _ in range(size)
        ]
        parts.append(encode_messages("orders", batch, compression_kind=rng.choice([NONE, NONE, ZSTD, LZ4])))
    return b"".join(parts)


def outcome(buf: bytes, small: int) -> Columns | str:
    try:
        return decode(buf, verify=False, small=small)
    except RecordCorrupted as exc:
        return str(exc)


def assert_same(buf: bytes) -> Columns | str:
    few, many = outcome(buf, SMALL_MESSAGES), outcome(buf, 0)
    if isinstance(many, str) or isinstance(few, str):
        assert few == many
        return few
    assert bytes(few.data) == bytes(many.data)
    for name in FIELDS:
        got, want = getattr(few, name), getattr(many, name)
        assert got.dtype == want.dtype and np.array_equal(got, want), name
    return few


@pytest.mark.parametrize("records", [1, 2, SMALL_RECORDS])
@pytest.mark.parametrize("messages", [1, 5, SMALL_MESSAGES])
def test_sound_buffers_decode_alike(records: int, messages: int) -> None:
    rng = random.Random(records * 100 + messages)
    for _ in range(5):
        if messages >= records:
            columns = assert_same(sample_buffer(rng, records, messages))
            assert isinstance(columns, Columns) and len(columns) == messages


def test_damaged_buffers_are_refused_alike() -> None:
    rng = random.Random(7)
    refused = 0
    for _ in range(3000):
        records = rng.randint(1, SMALL_RECORDS)
        buf = bytearray(sample_buffer(rng, records, rng.randint(records, SMALL_MESSAGES)))
        at = rng.randrange(len(buf))
        buf[at] = rng.choice([0, 1, 2, 0xFF, buf[at] ^ (1 << rng.randrange(8))])
        refused += isinstance(assert_same(bytes(buf)), str)
    assert refused > 500  # most changes land where a check sees them, and both checks agree
