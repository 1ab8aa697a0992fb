"""A few messages are decoded with ``struct`` (:mod:`rocketspark.codec.few`) and many with numpy;
both must give the same columns, or refuse with the same words, for any buffer: sound ones of
every shape, and thousands of damaged ones (a byte changed anywhere, its CRCs not checked, so
that the damage reaches the structural checks). A consumer's few records go straight to
messages (``messages.few_messages``): the same messages as through columns, or the same refusal."""

from __future__ import annotations

import random

import numpy as np
import pytest

from rocketspark.codec.build import encode_messages
from rocketspark.codec.columns import Columns, decode
from rocketspark.codec.few import SMALL_MESSAGES, SMALL_RECORDS
from rocketspark.codec.heads import record_starts
from rocketspark.codec.layout import HEADER, LZ4, NONE, ZSTD, RecordCorrupted
from rocketspark.codec.messages import few_messages, read_messages, to_messages
from rocketspark.protocol.types import Message, MessageExt

FIELDS = ("batch", "index", "body_at", "body_len", "tag_at", "tag_len", "has_tag", "ext_at", "ext_len")


def sample_buffer(
    rng: random.Random, records: int, messages: int, kinds: tuple[int, ...] = (NONE, NONE, ZSTD, LZ4)
) -> bytes:
    """``records`` records of ``messages`` messages in all: tags, keys and properties mixed,
    each record compressed with one of ``kinds``."""
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
        parts.append(encode_messages("orders", batch, compression_kind=rng.choice(kinds)))
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


HOST = bytes(range(8))


def as_messages(
    buf: bytes, verify: bool, first: int, stop: int | None, wanted: list[str] | None
) -> list[MessageExt] | str:
    """The messages through columns, as the consumer read them before ``few_messages``."""
    try:
        columns = decode(buf, verify=verify).select(first, stop, wanted)
        return to_messages(columns, "orders", "broker-a", HOST, queue_id=3, offset_delta=1000)
    except Exception as exc:  # damage the CRCs were not asked to catch fails in a tag's UTF-8 or in msgpack too
        return f"{type(exc).__name__}: {exc}"


def few_outcome(buf: bytes, verify: bool, first: int, stop: int | None, wanted: list[str] | None) -> object:
    try:
        return few_messages(
            buf, "orders", "broker-a", HOST, verify=verify, first=first, stop=stop, wanted=wanted, queue_id=3,
            offset_delta=1000,
        )  # fmt: skip
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"


def wraps_in_numpy(buf: bytes) -> bool:
    """Whether a header's 64-bit time or offset is 2^63 or more: numpy reads those as int64, so
    the columns see it negative where ``struct`` does not (damage a CRC would have refused)."""
    try:
        return any(HEADER.unpack_from(buf, pos)[k] >= 1 << 63 for pos in record_starts(buf) for k in (4, 5, 6, 13))
    except RecordCorrupted:
        return False


def assert_same_messages(rng: random.Random, buf: bytes, verify: bool) -> bool:
    """Whether ``few_messages`` read ``buf`` itself (rather than leaving it to the columns)."""
    first, stop = rng.choice([(0, None), (1, None), (0, 3), (2, 4)])
    wanted = rng.choice([None, ["A"], ["", "ünï"], ["B"]])
    few, reference = few_outcome(buf, verify, first, stop, wanted), as_messages(buf, verify, first, stop, wanted)
    if few is None or (not verify and wraps_in_numpy(buf)):
        return False
    assert few == reference
    if isinstance(few, list):
        assert [m.msg_id for m in few] == [m.msg_id for m in reference]  # type: ignore[union-attr]
    return True


@pytest.mark.parametrize("records", [1, 2, SMALL_RECORDS])
@pytest.mark.parametrize("messages", [1, 5, SMALL_MESSAGES])
def test_sound_buffers_read_to_the_same_messages(records: int, messages: int) -> None:
    if messages < records:
        pytest.skip("a record holds one message at least")
    rng = random.Random(records * 1000 + messages)
    for _ in range(4):
        assert_same_messages(rng, sample_buffer(rng, records, messages), verify=True)  # compressed records mixed in
    plain = [assert_same_messages(rng, sample_buffer(rng, records, messages, (NONE,)), verify=True) for _ in range(4)]
    assert all(plain)  # uncompressed records are read by few_messages, not left to the columns


def test_many_or_compressed_records_are_left_to_the_columns() -> None:
    rng = random.Random(3)
    plain = [encode_messages("orders", [Message("orders", b"x")] * SMALL_MESSAGES) for _ in range(2)]
    assert few_messages(b"".join(plain), "orders", "b", HOST, verify=True, first=0, stop=None, wanted=None) is None
    zstd = encode_messages("orders", [Message("orders", b"x")], compression_kind=ZSTD)
    assert few_messages(zstd, "orders", "b", HOST, verify=True, first=0, stop=None, wanted=None) is None
    many = b"".join(encode_messages("orders", [Message("orders", b"x")]) for _ in range(SMALL_RECORDS + 1))
    assert few_messages(many, "orders", "b", HOST, verify=True, first=0, stop=None, wanted=None) is None
    assert assert_same_messages(rng, plain[0], verify=True)


def test_damaged_buffers_are_refused_alike_as_messages() -> None:
    rng = random.Random(11)
    refused = read = 0
    for k in range(3000):
        records = rng.randint(1, SMALL_RECORDS)
        kinds = (NONE,) if k % 2 else (NONE, ZSTD, LZ4)
        buf = bytearray(sample_buffer(rng, records, rng.randint(records, SMALL_MESSAGES), kinds))
        at = rng.randrange(len(buf))
        buf[at] = rng.choice([0, 1, 2, 0xFF, buf[at] ^ (1 << rng.randrange(8))])
        verify = k % 3 == 0
        refused += isinstance(as_messages(bytes(buf), verify, 0, None, None), str)
        read += assert_same_messages(rng, bytes(buf), verify)
    assert refused > 500 and read > 500


def test_read_messages_gives_the_columns_messages_for_few_and_many() -> None:
    rng = random.Random(21)
    for records, messages in [(1, 1), (3, 9), (SMALL_RECORDS + 2, 40)]:
        buf = sample_buffer(rng, records, messages)
        got = read_messages(buf, "orders", "broker-a", HOST, verify=True, first=1, stop=None, wanted=None,
                            queue_id=3, offset_delta=1000)  # fmt: skip
        assert got == as_messages(buf, True, 1, None, None)
