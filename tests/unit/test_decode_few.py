"""A few messages are decoded with ``struct`` (:mod:`rocketspark.codec.few`) and many with numpy;
both must give the same columns, or refuse with the same words, for any buffer: sound ones of
every shape, and thousands of damaged ones (a byte changed anywhere, its CRCs not checked, so
that the damage reaches the structural checks). A consumer's few records go straight to
messages (``messages.few_messages``): the same messages as through columns, or the same refusal."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from rocketspark.client.logical import LogicalQueue, Segment
from rocketspark.client.pulling import PullPlan, finish_pull, plan_pull
from rocketspark.codec.build import encode_messages, stamped_head
from rocketspark.codec.columns import Columns, decode
from rocketspark.codec.few import SMALL_MESSAGES, SMALL_RECORDS
from rocketspark.codec.heads import record_starts
from rocketspark.codec.ids import NO_ID
from rocketspark.codec.layout import BODY_AT, HEADER, LZ4, NONE, ZSTD, RecordCorrupted
from rocketspark.codec.messages import few_messages, read_messages, to_messages
from rocketspark.codec.source import Source
from rocketspark.errors import DataCorruptedError
from rocketspark.protocol.codes import ResponseCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.static_mapping import LogicQueueMappingItem
from rocketspark.protocol.types import Message, MessageExt, PullStatus
from tests.helpers import as_version_2

BASE = 1_000  # the sample records' first queue offset
FIELDS = ("batch", "index", "body_at", "body_len", "tag_at", "tag_len", "has_tag", "ext_at", "ext_len")


def sample_buffer(
    rng: random.Random, records: int, messages: int, kinds: tuple[int, ...] = (NONE, NONE, ZSTD, LZ4)
) -> bytes:
    """``records`` records of ``messages`` messages in all, as a pull answers them: stored one
    after another on queue 2 (base offsets counting on from ``BASE``, log offsets, store times),
    tags, keys and properties mixed, each record compressed with one of ``kinds``, some without
    client ids, some of layout version 2."""
    sizes = [1] * records
    for _ in range(messages - records):
        sizes[rng.randrange(records)] += 1
    parts, base, phys = [], BASE, 7_000_000
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
        kind = rng.choice(kinds)
        record = encode_messages("orders", batch, compression_kind=kind, first_id=rng.choice([None, None, NO_ID]))
        if rng.random() < 0.2:
            record = as_version_2(record)
        parts.append(stamped_head(record, 2, base, phys, 1_700_000_000_000 + base) + record[BODY_AT:])
        base, phys = base + size, phys + len(record)
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


AS_STORED = Source("orders", 2, 0, "broker-a", HOST)  # the sample records' own queue, offsets as stored
RELABELLED = Source("orders", 3, 1000, "broker-a", HOST)  # as a static topic's logical queue reads them


def as_messages(
    buf: bytes, verify: bool, first: int, stop: int | None, wanted: list[str] | None, source: Source = RELABELLED
) -> list[MessageExt] | str:
    """The messages through columns, as the consumer read them before ``few_messages``."""
    try:
        columns = decode(buf, verify=verify).select(first, stop, wanted)
        return to_messages(
            columns, "orders", "broker-a", HOST, queue_id=source.queue_id, offset_delta=source.offset_delta
        )
    except Exception as exc:  # damage the CRCs were not asked to catch fails in a tag's UTF-8 or in msgpack too
        return f"{type(exc).__name__}: {exc}"


def few_outcome(
    buf: bytes, verify: bool, first: int, stop: int | None, wanted: list[str] | None, source: Source
) -> object:
    try:
        return few_messages(buf, source, verify=verify, first=first, stop=stop, wanted=wanted)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"


def wraps_in_numpy(buf: bytes) -> bool:
    """Whether a header's 64-bit time or offset is 2^63 or more: numpy reads those as int64, so
    the columns see it negative where ``struct`` does not (damage a CRC would have refused)."""
    try:
        return any(HEADER.unpack_from(buf, pos)[k] >= 1 << 63 for pos in record_starts(buf) for k in (4, 5, 6, 13))
    except RecordCorrupted:
        return False


def assert_same_messages(rng: random.Random, buf: bytes, verify: bool, *, sound: bool = False) -> bool:
    """Whether ``few_messages`` read ``buf`` itself (rather than leaving it to the columns);
    a ``sound`` buffer must read to messages, not to an error both readers share."""
    first, stop = rng.choice([(BASE, None), (BASE + 1, None), (BASE, BASE + 3), (BASE + 2, BASE + 4), (0, None)])
    wanted = rng.choice([None, ["A"], ["", "ünï"], ["B"]])
    source = rng.choice([RELABELLED, AS_STORED])
    few = few_outcome(buf, verify, first, stop, wanted, source)
    reference = as_messages(buf, verify, first, stop, wanted, source)
    if sound:
        assert isinstance(reference, list)
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
        assert_same_messages(rng, sample_buffer(rng, records, messages), verify=True, sound=True)  # compressed ones
    plain = [
        assert_same_messages(rng, sample_buffer(rng, records, messages, (NONE,)), verify=True, sound=True)
        for _ in range(8)
    ]
    assert all(plain)  # uncompressed records are read by few_messages, not left to the columns


def test_many_or_compressed_records_are_left_to_the_columns() -> None:
    rng = random.Random(3)
    plain = [encode_messages("orders", [Message("orders", b"x")] * SMALL_MESSAGES) for _ in range(2)]
    assert few_messages(b"".join(plain), AS_STORED, verify=True, first=0, stop=None, wanted=None) is None
    zstd = encode_messages("orders", [Message("orders", b"x")], compression_kind=ZSTD)
    assert few_messages(zstd, AS_STORED, verify=True, first=0, stop=None, wanted=None) is None
    many = b"".join(encode_messages("orders", [Message("orders", b"x")]) for _ in range(SMALL_RECORDS + 1))
    assert few_messages(many, AS_STORED, verify=True, first=0, stop=None, wanted=None) is None
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
    for records, messages, kinds in [
        (1, 1, (NONE,)),
        (3, 9, (NONE,)),
        (2, 4, (ZSTD,)),
        (SMALL_RECORDS + 2, 40, (NONE,)),
    ]:
        buf = sample_buffer(rng, records, messages, kinds)
        read_few = few_messages(buf, AS_STORED, verify=True, first=0, stop=None, wanted=None) is not None
        assert read_few == (kinds == (NONE,) and records <= SMALL_RECORDS)
        got = read_messages(buf, RELABELLED, verify=True, first=BASE + 1, stop=None, wanted=None)
        assert got == as_messages(buf, True, BASE + 1, None, None) and len(got) == messages - 1


def test_a_memoryview_reads_as_its_bytes() -> None:
    buf = sample_buffer(random.Random(5), 2, 3, (NONE,))
    args: dict[str, Any] = {"verify": True, "first": 0, "stop": None, "wanted": None}
    got = few_messages(memoryview(buf), AS_STORED, **args)
    assert got is not None and got == few_messages(buf, AS_STORED, **args)
    assert all(type(m.body) is bytes for m in got)


def test_a_small_pull_reads_relabelled_and_its_damage_is_reported_where_it_was_read() -> None:
    """Through ``finish_pull``: a static topic's segment (logical 10,000 is physical ``BASE``)."""
    item = LogicQueueMappingItem(gen=1, queue_id=2, bname="broker-a", logic_offset=10_000, start_offset=BASE)
    segment = Segment(item, "127.0.0.1:10911")
    plan = plan_pull(LogicalQueue("orders", 5, (segment,), 1, True), 10_000, 32, timeout_ms=1000)
    assert isinstance(plan, PullPlan)
    body = sample_buffer(random.Random(9), 1, 2, (NONE,))
    ext = {"next": BASE + 2, "min": BASE, "max": BASE + 2}
    result = finish_pull(plan, RemotingCommand(ResponseCode.SUCCESS, ext=ext, body=body), verify=True)
    assert result.status is PullStatus.FOUND and result.next_offset == 10_002
    assert [(m.queue_id, m.queue_offset) for m in result.messages] == [(5, 10_000), (5, 10_001)]
    damaged = bytearray(body)
    damaged[-1] ^= 0x01
    with pytest.raises(
        DataCorruptedError, match=r"orders queue 5 \(read from offset 10000 on broker broker-a\).*body CRC"
    ):
        finish_pull(plan, RemotingCommand(ResponseCode.SUCCESS, ext=ext, body=bytes(damaged)), verify=True)
