"""The batch record codec (rocketspark.codec): build, stamp, check, decode, select, and the
Message, Arrow and from-Arrow views of it. Pure functions over bytes: no servers."""

from __future__ import annotations

import re
import struct
import time
import zlib
from collections import Counter
from collections.abc import Sequence

import msgpack
import numpy as np
import pyarrow as pa
import pytest

from rocketspark.codec import compression, ids, layout
from rocketspark.codec.arrow import SCHEMA, to_record_batch
from rocketspark.codec.build import (
    Idempotence,
    Section,
    build_section,
    chunk_messages,
    drop_front,
    encode_batch,
    encode_messages,
    join_section,
    pack_ext,
    record_overhead,
    stamped_head,
    tag_summary_of,
    with_first_id,
)
from rocketspark.codec.columns import Columns, decode
from rocketspark.codec.from_arrow import MessageArrays, records
from rocketspark.codec.heads import check_record
from rocketspark.codec.ingest import SMALL_BATCH, built_here, check_sent
from rocketspark.codec.layout import (
    BATCH_MAGIC,
    BLOOM_BITS,
    BODY_AT,
    BODY_CRC_AT,
    BROKER_AT,
    BROKER_END,
    BROKER_FIELDS,
    F_ATTRIBUTES,
    F_BASE_OFFSET,
    F_BASE_SEQUENCE,
    F_BODY_CRC,
    F_BORN_MS,
    F_COUNT,
    F_FIRST_ID,
    F_HEADER_CRC,
    F_LOG_OFFSET,
    F_MAGIC,
    F_PRODUCER_EPOCH,
    F_PRODUCER_ID,
    F_QUEUE_ID,
    F_SECTION_SIZE,
    F_STORE_MS,
    F_TAG_SUMMARY,
    F_TOPIC_LEN,
    F_TOTAL,
    F_VERSION,
    HEADER,
    HEADER_DTYPE,
    HEADER_SIZE,
    LZ4,
    MAX_COUNT,
    MAX_TAG_BYTES,
    MIXED,
    NONE,
    PRODUCER_FIELDS,
    VERSION,
    ZSTD,
    RecordCorrupted,
    summary_matches,
    tag_hash,
)
from rocketspark.codec.messages import to_messages
from rocketspark.codec.sent import BatchRefused, BodyTooLarge, SentBatch, framed
from rocketspark.codec.source import Source
from rocketspark.protocol.types import Message, MessageExt
from tests.helpers import as_version_2

TOPIC = "orders"
BROKER = "broker-a"
HOST = ids.store_host("10.0.0.7:10911")  # where the tests' records are read from
SECTION_AT = HEADER_SIZE + len(TOPIC)  # where a TOPIC record's message section starts


HEADER_CRC_AT = 8
VERSION_AT = 48
COUNT_AT = 52
BORN_AT = 56
SECTION_SIZE_AT = 88
ATTRIBUTES_AT = 49


# --- helpers -------------------------------------------------------------------------------


def message(body: bytes = b"b", **kwargs: object) -> Message:
    return Message(TOPIC, body, **kwargs)  # type: ignore[arg-type]


def sample_messages() -> list[Message]:
    """Every shape of message: empty body, no tag, empty tag, unicode tag, keys, properties."""
    return [
        message(b""),
        message(b"plain", tags=""),
        message(b"x" * 40, tags="ünïcødé", keys=["k1", "k2"]),
        message(b"\x00\xff", tags="A", properties={"p": "v", "ü": "ö"}),
        message(b"both", tags="B", keys="single", properties={"a": "b"}),
    ]


def store(
    record: bytes, queue_id: int = 3, base_offset: int = 100, phys: int = 5000, store_ms: int = 1_700_000_000_123
) -> bytes:
    """What the broker appends for a sent record: its own fields stamped in."""
    return stamped_head(record, queue_id, base_offset, phys, store_ms) + record[BODY_AT:]


def stored(messages: list[Message], **kwargs: int) -> bytes:
    return store(encode_messages(TOPIC, messages), **kwargs)


def header(record: bytes, pos: int = 0) -> tuple[int, ...]:
    return HEADER.unpack_from(record, pos)


def first_id_in(record: bytes) -> bytes:
    """The first client id a (version 3) record's header carries."""
    raw: bytes = HEADER.unpack_from(record)[F_FIRST_ID]
    return raw


def with_crcs(buf: bytes | bytearray) -> bytes:
    """``buf`` (one record) with both CRCs recomputed, so only structure checks can object."""
    out = bytearray(buf)
    total = struct.unpack_from(">I", out, 0)[0]
    struct.pack_into(">I", out, BODY_CRC_AT, zlib.crc32(out[BODY_AT:total]))
    struct.pack_into(">I", out, HEADER_CRC_AT, zlib.crc32(out[BROKER_AT:BROKER_END]))
    return bytes(out)


def patched(record: bytes, at: int, fmt: str, value: int) -> bytes:
    """``record`` with ``value`` packed at ``at`` and both CRCs made valid again."""
    out = bytearray(record)
    struct.pack_into(fmt, out, at, value)
    return with_crcs(out)


def flipped(record: bytes, at: int) -> bytes:
    out = bytearray(record)
    out[at] ^= 0xFF
    return bytes(out)


def raw_record(bodies: list[bytes], tags: Sequence[bytes | None], exts: list[bytes]) -> bytes:
    """A record built from raw column bytes, bypassing build_section's checks (bad tags, exts)."""
    has_tag = np.array([t is not None for t in tags], dtype=np.uint8)
    tag_bytes = [t or b"" for t in tags]
    section = join_section(
        np.array([len(b) for b in bodies], dtype=np.int64),
        b"".join(bodies),
        np.array([len(t) for t in tag_bytes], dtype=np.int64),
        b"".join(tag_bytes),
        np.array([len(e) for e in exts], dtype=np.int64),
        b"".join(exts),
        has_tag,
    )
    return encode_batch(TOPIC.encode(), Section(section, len(bodies), 0))


def decoded(buf: bytes) -> list[MessageExt]:
    return to_messages(decode(buf), TOPIC, BROKER, HOST)


def bodies_of(columns: Columns) -> list[bytes]:
    data = bytes(columns.data)
    return [data[a : a + n] for a, n in zip(columns.body_at.tolist(), columns.body_len.tolist(), strict=True)]


def tagged(*tags: str | None) -> list[Message]:
    return [message(f"m{i}".encode(), tags=t) for i, t in enumerate(tags)]


def check(record: bytes, max_body: int = 1 << 20, max_section: int = 1 << 24) -> SentBatch:
    """``check_sent``, held to giving the same answer however it checks: a record of bodies
    alone over its body offsets (one message: its offsets at once; more: with numpy), a small
    batch message by message (``plain=False``), any batch decoded with numpy (``small=0,
    plain=False``)."""
    outcomes: list[SentBatch | Exception] = []
    for small, plain in ((SMALL_BATCH, True), (SMALL_BATCH, False), (0, True), (0, False)):
        try:
            outcomes.append(check_sent(record, max_body=max_body, max_section=max_section, small=small, plain=plain))
        except (BatchRefused, BodyTooLarge) as exc:
            outcomes.append(exc)
    one_by_one = outcomes[0]
    for other in outcomes[1:]:
        assert type(one_by_one) is type(other), (one_by_one, other)
        if isinstance(one_by_one, BodyTooLarge):
            assert isinstance(other, BodyTooLarge)
            assert (one_by_one.index, one_by_one.size) == (other.index, other.size)
        if isinstance(one_by_one, Exception):
            assert str(one_by_one) == str(other)  # the same fault named, in the same words
        else:
            assert one_by_one == other
    if isinstance(one_by_one, Exception):
        raise one_by_one
    return one_by_one


# --- round trip ----------------------------------------------------------------------------


@pytest.mark.parametrize("tags", [("",), ("", ""), ("", None), (None, ""), ("", "A")])
def test_an_empty_tag_is_kept_apart_from_no_tag_however_the_batch_is_made(tags: tuple[str | None, ...]) -> None:
    """A single send, a batch of empty tags and a batch of mixed ones are encoded by different
    paths; each keeps an empty tag as an empty tag."""
    assert [m.tags for m in decoded(stored(tagged(*tags)))] == list(tags)


def test_bodies_tags_keys_and_properties_survive_a_round_trip() -> None:
    sent = sample_messages()
    got = decoded(stored(sent))
    assert [m.body for m in got] == [m.body for m in sent]
    assert [m.tags for m in got] == [None, "", "ünïcødé", "A", "B"]
    assert [m.keys for m in got] == [[], [], ["k1", "k2"], [], ["single"]]
    assert [m.properties for m in got] == [{}, {}, {}, {"p": "v", "ü": "ö"}, {"a": "b"}]
    assert {m.topic for m in got} == {TOPIC} and {m.broker_name for m in got} == {BROKER}


def test_queue_offsets_count_up_from_the_stamped_base_offset() -> None:
    got = decoded(stored(sample_messages(), queue_id=3, base_offset=100))
    assert [(m.queue_id, m.queue_offset, m.batch_index) for m in got] == [(3, 100 + i, i) for i in range(5)]


def test_message_ids_follow_from_the_records_first_id() -> None:
    first = ids.IdMinter(bytes([10, 0, 0, 9]), pid=77, instance=5).next(5)
    got = decoded(store(encode_messages(TOPIC, sample_messages(), first_id=first), phys=0x1234))
    for i, m in enumerate(got):
        assert re.fullmatch("[0-9A-F]{32}", m.msg_id)
        assert m.msg_id == m.client_id == f"{int.from_bytes(first, 'big') + i:032X}"
        assert m.msg_id.startswith("0A000009" + "004D" + "00000005")  # ip, pid, instance
        assert m.offset_msg_id == "0A000007" + "00002A9F" + f"{0x1234 + i:016X}"  # ip, port, physical offset
    assert len({m.msg_id for m in got}) == len(got)


def test_a_message_with_a_uniq_key_of_its_own_keeps_it() -> None:
    sent = [message(b"a"), message(b"b", properties={"UNIQ_KEY": "01B0C0FFEE"}), message(b"c")]
    first = ids.mint(3)
    columns = decode(store(encode_messages(TOPIC, sent, first_id=first)))
    got = to_messages(columns, TOPIC, BROKER, HOST)
    assert [m.msg_id for m in got] == [ids.client_id_at(first, 0), "01B0C0FFEE", ids.client_id_at(first, 2)]
    assert [columns.client_id(i) for i in range(3)] == [m.msg_id for m in got]
    assert columns.derived_id(1) == ids.client_id_at(first, 1)  # from the header alone
    batch = to_record_batch(columns, Source(TOPIC, 0, 0, BROKER, HOST), SCHEMA)
    assert batch.column("msgId").to_pylist() == [m.msg_id for m in got]


def test_born_time_is_the_producers_clock_and_store_time_the_brokers() -> None:
    before = int(time.time() * 1000)
    record = encode_messages(TOPIC, sample_messages())
    after = int(time.time() * 1000)
    got = decoded(store(record, store_ms=1_700_000_000_123))
    assert len({m.born_timestamp for m in got}) == 1 and before <= got[0].born_timestamp <= after
    assert {m.store_timestamp for m in got} == {1_700_000_000_123}
    assert {m.commitlog_offset for m in got} == {5000}


def test_a_single_message_is_a_batch_of_one() -> None:
    (got,) = decoded(stored([message(b"one", tags="T")]))
    assert (got.body, got.tags, got.queue_offset, got.batch_index) == (b"one", "T", 100, 0)


def test_to_messages_relabels_queue_id_and_offsets_for_a_logical_queue() -> None:
    got = to_messages(
        decode(stored(tagged(None, None), queue_id=3, base_offset=10)), TOPIC, BROKER, HOST, queue_id=7, offset_delta=90
    )
    assert [(m.queue_id, m.queue_offset) for m in got] == [(7, 100), (7, 101)]


def test_records_concatenated_in_one_buffer_decode_in_order() -> None:
    first = stored(tagged("A", "B"), queue_id=1, base_offset=0, phys=0)
    second = stored([message(b"x" * 100)], queue_id=1, base_offset=2, phys=len(first))
    third = stored(tagged(None, "C", None), queue_id=1, base_offset=3, phys=len(first) + len(second))
    got = decoded(first + second + third)
    assert [m.queue_offset for m in got] == [0, 1, 2, 3, 4, 5]
    assert [m.body for m in got] == [b"m0", b"m1", b"x" * 100, b"m0", b"m1", b"m2"]
    assert [m.tags for m in got] == ["A", "B", None, None, "C", None]
    assert [m.commitlog_offset for m in got] == [0, 0, len(first)] + [len(first) + len(second)] * 3
    assert [m.batch_index for m in got] == [0, 1, 0, 0, 1, 2]


def test_an_empty_buffer_decodes_to_no_messages() -> None:
    columns = decode(b"")
    assert len(columns) == 0 and len(columns.heads) == 0 and to_messages(columns, TOPIC, BROKER, HOST) == []


def test_a_sent_record_has_zero_broker_fields_and_stamping_fills_them() -> None:
    record = encode_messages(TOPIC, tagged("A"))
    assert header(record)[F_QUEUE_ID:F_BODY_CRC] == (0, 0, 0, 0, 0)
    assert header(record)[F_HEADER_CRC] == zlib.crc32(bytes(BROKER_END - BROKER_AT))  # valid for zero fields
    head = header(store(record, queue_id=3, base_offset=100, phys=5000, store_ms=77))
    assert head[F_QUEUE_ID:F_BODY_CRC] == (3, 100, 5000, 77, 0)
    assert head[F_HEADER_CRC] == zlib.crc32(store(record, 3, 100, 5000, 77)[BROKER_AT:BROKER_END])


def test_stamping_leaves_the_producers_bytes_and_body_crc_alone() -> None:
    record = encode_messages(TOPIC, sample_messages())
    assert store(record)[BODY_AT - 4 :] == record[BODY_AT - 4 :]
    assert check_record(record, 0, len(record)) == len(record)  # an unstamped record is consistent too


def test_check_record_walks_concatenated_records() -> None:
    first, second = stored(tagged("A")), stored(tagged("B", "C"), phys=999)
    buf = first + second
    assert check_record(buf, 0, len(buf)) == len(first)
    assert check_record(buf, len(first), len(buf)) == len(second)


def test_the_header_says_what_the_producer_sent() -> None:
    idem = Idempotence(producer_id=42, epoch=3, base_sequence=17)
    record = encode_messages(TOPIC, tagged("A", "A"), compression_kind=ZSTD, idempotence=idem)
    head = header(record)
    assert (head[F_VERSION], head[F_ATTRIBUTES], head[F_TOPIC_LEN], head[F_COUNT]) == (VERSION, ZSTD, len(TOPIC), 2)
    assert (head[F_PRODUCER_ID], head[F_PRODUCER_EPOCH], head[F_BASE_SEQUENCE]) == (42, 3, 17)
    assert record[HEADER_SIZE:SECTION_AT] == TOPIC.encode()
    assert head[F_TOTAL] == len(record)


def test_the_single_field_offsets_are_where_the_header_puts_them() -> None:
    record = encode_messages(TOPIC, tagged("A", "B", "C"))
    head = header(record)
    assert int.from_bytes(record[COUNT_AT : COUNT_AT + 4], "big") == head[F_COUNT] == 3
    assert int.from_bytes(record[BORN_AT : BORN_AT + 8], "big") == head[F_BORN_MS]
    fields = HEADER_DTYPE.fields
    assert fields is not None
    assert (fields["count"][1], fields["born_ms"][1]) == (layout.COUNT_AT, layout.BORN_AT) == (COUNT_AT, BORN_AT)


def test_pack_ext_is_empty_without_keys_or_properties() -> None:
    assert pack_ext([], {}) == b""
    assert msgpack.unpackb(pack_ext(["k"], {"p": "v"})) == [["k"], {"p": "v"}]


def test_a_tag_over_the_limit_is_refused_when_building() -> None:
    with pytest.raises(ValueError, match="limited to"):
        build_section([b"b"], ["x" * (MAX_TAG_BYTES + 1)], [b""])


# --- compression ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", [ZSTD, LZ4])
def test_a_compressed_record_decodes_to_the_same_messages(kind: int) -> None:
    sent = sample_messages()
    got = decoded(store(encode_messages(TOPIC, sent, compression_kind=kind)))
    assert [(m.body, m.tags, m.keys, m.properties) for m in got] == [
        (m.body, m.tags, m.keys, m.properties) for m in sent
    ]
    assert [m.queue_offset for m in got] == [100, 101, 102, 103, 104]


@pytest.mark.parametrize("kind", [ZSTD, LZ4])
def test_compression_shrinks_repetitive_bodies(kind: int) -> None:
    sent = [message(b"the same words again " * 50, tags="T") for _ in range(20)]
    plain = encode_messages(TOPIC, sent)
    packed = encode_messages(TOPIC, sent, compression_kind=kind)
    assert len(packed) < len(plain) // 10
    assert header(packed)[F_SECTION_SIZE] == header(plain)[F_SECTION_SIZE]  # the uncompressed size
    assert header(packed)[F_ATTRIBUTES] == kind


def test_compressed_and_plain_records_decode_together_in_one_buffer() -> None:
    a = stored(tagged("A", "B"), base_offset=0)
    b = store(encode_messages(TOPIC, tagged("C"), compression_kind=ZSTD), base_offset=2)
    c = stored(tagged(None), base_offset=3)
    d = store(encode_messages(TOPIC, tagged("D", "E"), compression_kind=LZ4), base_offset=4)
    got = decoded(a + b + c + d)
    assert [(m.queue_offset, m.body, m.tags) for m in got] == [
        (0, b"m0", "A"),
        (1, b"m1", "B"),
        (2, b"m0", "C"),
        (3, b"m0", None),
        (4, b"m0", "D"),
        (5, b"m1", "E"),
    ]


# --- select and tag filters ----------------------------------------------------------------


def test_select_keeps_queue_offsets_from_first_up_to_but_not_including_end() -> None:
    columns = decode(stored(tagged(*"ABCDE"), base_offset=10))
    assert columns.select(12, 14).queue_offset.tolist() == [12, 13]
    assert columns.select(12).queue_offset.tolist() == [12, 13, 14]
    assert len(columns.select(15)) == 0 and len(columns.select(0, 10)) == 0


def test_select_of_everything_is_the_columns_themselves() -> None:
    columns = decode(stored(tagged("A", "B")))
    assert columns.select(0) is columns


def test_select_by_tags_compares_whole_tags() -> None:
    columns = decode(stored(tagged("A", "AB", None, "B", "", "ünï", "A"), base_offset=0))
    assert columns.select(0, None, ["A"]).queue_offset.tolist() == [0, 6]
    assert columns.select(0, None, ["B", "ünï"]).queue_offset.tolist() == [3, 5]
    assert columns.select(0, None, ["AB", "missing"]).queue_offset.tolist() == [1]
    assert len(columns.select(0, None, ["a"])) == 0


def test_select_by_offsets_and_tags_together() -> None:
    columns = decode(stored(tagged("A", "B", "A", "B", "A"), base_offset=0))
    picked = columns.select(1, 4, ["A"])
    assert picked.queue_offset.tolist() == [2] and bodies_of(picked) == [b"m2"]


def test_select_spans_several_records() -> None:
    buf = stored(tagged("A", "B"), base_offset=0) + stored(tagged("B", "A"), base_offset=2, phys=1000)
    picked = decode(buf).select(1, None, ["A"])
    assert picked.queue_offset.tolist() == [3] and picked.per_message("commitlog_offset").tolist() == [1000]


def test_tag_hash_is_crc32_and_zero_for_no_or_empty_tag() -> None:
    assert tag_hash(b"TagA") == zlib.crc32(b"TagA")
    assert tag_hash(b"x") == 0x8CDC1683  # stored consume queues hold these: they must never change
    assert tag_hash(None) == tag_hash(b"") == 0


def test_a_batch_with_one_tag_has_that_tags_hash_as_summary() -> None:
    record = encode_messages(TOPIC, tagged("A", "A", "A"))
    assert tag_summary_of(record) == tag_hash(b"A") and not tag_summary_of(record) & MIXED


@pytest.mark.parametrize("tags", [(None,), (None, None), ("",), (None, "")])
def test_a_batch_without_real_tags_has_summary_zero(tags: tuple[str | None, ...]) -> None:
    assert tag_summary_of(encode_messages(TOPIC, tagged(*tags))) == 0


def test_a_mixed_batch_summary_has_the_mixed_bit_and_one_bit_per_tag() -> None:
    tags = ["A", "B", "ünï", None]
    summary = tag_summary_of(encode_messages(TOPIC, tagged(*tags)))
    bits = {tag_hash(t.encode()) % BLOOM_BITS for t in tags if t}
    assert summary == MIXED | sum(1 << b for b in bits)


def test_a_mixed_summary_never_says_no_to_a_tag_it_holds() -> None:
    tags = [f"tag-{i}" for i in range(10)]
    summary = tag_summary_of(encode_messages(TOPIC, tagged(*tags)))
    assert summary & MIXED
    for t in tags:
        assert summary_matches(summary, frozenset({tag_hash(t.encode())}))
    absent = next(
        h for h in (tag_hash(f"other-{i}".encode()) for i in range(1000)) if not summary >> (h % BLOOM_BITS) & 1
    )
    assert not summary_matches(summary, frozenset({absent}))


def test_a_uniform_summary_matches_exactly_its_own_tag() -> None:
    summary = tag_summary_of(encode_messages(TOPIC, tagged("A", "A")))
    assert summary_matches(summary, frozenset({tag_hash(b"A")}))
    assert summary_matches(summary, frozenset({tag_hash(b"B"), tag_hash(b"A")}))
    assert not summary_matches(summary, frozenset({tag_hash(b"B")}))


def test_an_untagged_summary_matches_no_tag() -> None:
    summary = tag_summary_of(encode_messages(TOPIC, tagged(None, None)))
    assert not summary_matches(summary, frozenset({tag_hash(b"A"), tag_hash(b"B")}))


def test_a_tagged_batch_with_some_untagged_messages_keeps_its_tags_summary() -> None:
    summary = tag_summary_of(encode_messages(TOPIC, tagged("A", None, "")))
    assert summary == tag_hash(b"A")


# --- Arrow ---------------------------------------------------------------------------------


def arrow_batch(messages: list[Message], source: Source, **stamp: int) -> tuple[pa.RecordBatch, bytes]:
    buf = stored(messages, **stamp)
    return to_record_batch(decode(buf), source, SCHEMA), buf


def test_to_record_batch_fills_every_column() -> None:
    source = Source(TOPIC, 7, 1000, BROKER, HOST)
    batch, buf = arrow_batch(sample_messages(), source, base_offset=100, phys=5000, store_ms=9)
    born = header(buf)[F_BORN_MS]
    assert batch.schema == SCHEMA and batch.num_rows == 5
    columns = batch.to_pydict()
    assert columns["topic"] == [TOPIC] * 5 and columns["brokerName"] == [BROKER] * 5
    assert columns["queueId"] == [7] * 5
    assert columns["queueOffset"] == [1100, 1101, 1102, 1103, 1104]
    assert columns["msgId"] == [m.msg_id for m in decoded(buf)]
    assert columns["msgId"] == [ids.client_id_at(first_id_in(buf), i) for i in range(5)]
    assert columns["tag"] == [None, "", "ünïcødé", "A", "B"]
    assert columns["body"] == [m.body for m in sample_messages()]
    assert columns["keys"] == [None, None, ["k1", "k2"], None, ["single"]]
    assert columns["properties"] == [None, None, None, [("p", "v"), ("ü", "ö")], [("a", "b")]]
    assert columns["priority"] == [None] * 5
    assert batch.column("bornTimestamp").cast(pa.int64()).to_pylist() == [born * 1000] * 5
    assert batch.column("storeTimestamp").cast(pa.int64()).to_pylist() == [9000] * 5


def test_to_record_batch_without_keys_or_properties_has_null_columns() -> None:
    batch, _ = arrow_batch(tagged("A", None), Source(TOPIC, 0, 0, BROKER))
    assert batch.column("keys").null_count == 2 and batch.column("properties").null_count == 2
    assert batch.column("priority").null_count == 2


def test_a_priority_messages_priority_is_its_own_column() -> None:
    sent = [
        message(b"a", properties={"_SYS_MSG_PRIORITY_": "7"}),
        message(b"b", properties={"_SYS_MSG_PRIORITY_": "high"}),  # by hand, not a number: null
        message(b"c", properties={"other": "x"}),
    ]
    batch, _ = arrow_batch(sent, Source(TOPIC, 0, 0, BROKER))
    assert batch.column("priority").to_pylist() == [7, None, None]


def test_to_record_batch_slices_bodies_and_tags_of_every_length() -> None:
    # Arrow's view layout inlines values of up to 12 bytes and points at longer ones.
    lengths = [0, 1, 11, 12, 13, 100]
    sent = [message(bytes([65 + i]) * n, tags="t" * n) for i, n in enumerate(lengths)]
    batch, _ = arrow_batch(sent, Source(TOPIC, 0, 0, BROKER))
    assert batch.column("body").to_pylist() == [m.body for m in sent]
    assert batch.column("tag").to_pylist() == [m.tags for m in sent]


def test_to_record_batch_of_several_compressed_records() -> None:
    a = store(encode_messages(TOPIC, tagged("A", None), compression_kind=ZSTD), base_offset=0, phys=0)
    b = store(encode_messages(TOPIC, tagged(None, "B"), compression_kind=LZ4), base_offset=2, phys=len(a))
    batch = to_record_batch(decode(a + b), Source(TOPIC, 1, 0, BROKER), SCHEMA)
    assert batch.column("body").to_pylist() == [b"m0", b"m1", b"m0", b"m1"]
    assert batch.column("tag").to_pylist() == ["A", None, None, "B"]
    assert batch.column("queueOffset").to_pylist() == [0, 1, 2, 3]
    assert batch.column("msgId").to_pylist() == [m.msg_id for m in decoded(a + b)]


def test_to_record_batch_of_selected_messages() -> None:
    columns = decode(stored(tagged("A", "B", "A"), base_offset=0)).select(0, None, ["A"])
    batch = to_record_batch(columns, Source(TOPIC, 0, 0, BROKER), SCHEMA)
    assert batch.column("queueOffset").to_pylist() == [0, 2]
    assert batch.column("body").to_pylist() == [b"m0", b"m2"]
    first = columns.heads.first_id(0)
    assert first is not None
    assert batch.column("msgId").to_pylist() == [ids.client_id_at(first, 0), ids.client_id_at(first, 2)]


def test_to_record_batch_of_no_messages_is_empty_with_the_schema() -> None:
    batch = to_record_batch(decode(b""), Source(TOPIC, 0, 0, BROKER), SCHEMA)
    assert batch.num_rows == 0 and batch.schema == SCHEMA


def test_to_record_batch_follows_the_schemas_column_order_and_subset() -> None:
    schema = pa.schema([("body", pa.binary()), ("queueOffset", pa.int64())])
    batch = to_record_batch(decode(stored(tagged("A"))), Source(TOPIC, 0, 0, BROKER), schema)
    assert batch.schema == schema and batch.to_pydict() == {"body": [b"m0"], "queueOffset": [100]}


@pytest.mark.parametrize(
    "first",
    [
        bytes.fromhex("0A000009004D00000005000000000000"),
        bytes.fromhex("0A000009004D0000000500000000FFF0"),  # the counter wraps inside the batch
        bytes.fromhex("0A000009004D00000005FFFFFFFFFFF0"),  # and carries into the instance field
        bytes.fromhex("FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF8"),  # and past 128 bits: wraps, as client_id_at does
    ],
)
def test_arrow_client_ids_are_the_first_id_plus_the_place(first: bytes) -> None:
    a = store(encode_messages(TOPIC, [message(b"x")] * 40, first_id=first), base_offset=0, phys=0)
    b = store(encode_messages(TOPIC, [message(b"y")] * 3), base_offset=40, phys=len(a))
    columns = decode(a + b)
    got = to_record_batch(columns, Source(TOPIC, 0, 0, BROKER), SCHEMA).column("msgId").to_pylist()
    second = columns.heads.first_id(1)
    assert second is not None
    assert got == [ids.client_id_at(first, i) for i in range(40)] + [ids.client_id_at(second, i) for i in range(3)]
    kept = columns.take(np.arange(43) % 7 == 3)  # a filtered read: places with gaps
    got = to_record_batch(kept, Source(TOPIC, 0, 0, BROKER), SCHEMA).column("msgId").to_pylist()
    assert got == [m.msg_id for m in to_messages(kept, TOPIC, BROKER, HOST)]


def test_a_version_2_record_still_reads_and_its_ids_fall_back_to_offset_ids() -> None:
    old = store(as_version_2(encode_messages(TOPIC, sample_messages())), base_offset=0, phys=0)
    new = store(encode_messages(TOPIC, tagged("A", None)), base_offset=5, phys=len(old))
    assert check_record(old, 0, len(old)) == len(old)
    got = decoded(old + new)
    assert [m.body for m in got[:5]] == [m.body for m in sample_messages()]
    assert [m.properties for m in got[:5]] == [{}, {}, {}, {"p": "v", "ü": "ö"}, {"a": "b"}]
    assert [m.client_id for m in got[:5]] == [None] * 5  # RocketMQ's getMsgId without UNIQ_KEY
    assert [m.msg_id for m in got[:5]] == [ids.offset_msg_id_at(HOST, i) for i in range(5)]
    assert [m.msg_id for m in got[5:]] == [m.client_id for m in got[5:]] and got[5].client_id is not None
    batch = to_record_batch(decode(old + new), Source(TOPIC, 0, 0, BROKER, HOST), SCHEMA)
    assert batch.column("msgId").to_pylist() == [m.msg_id for m in got]
    assert batch.column("topic").to_pylist() == [TOPIC] * 7


def test_a_version_2_send_is_accepted_and_given_ids() -> None:
    sent = as_version_2(encode_messages(TOPIC, sample_messages()))
    batch = check(sent)
    assert batch.first_id is None and batch.count == 5 and batch.topic == TOPIC.encode()
    first = ids.mint(5)
    upgraded = with_first_id(sent, first)
    assert header(upgraded)[F_VERSION] == VERSION and first_id_in(upgraded) == first
    assert check(upgraded).first_id == first
    got = decoded(store(upgraded))
    assert [m.body for m in got] == [m.body for m in sample_messages()]
    assert [m.msg_id for m in got] == [ids.client_id_at(first, i) for i in range(5)]


def test_a_record_sent_without_ids_says_so_and_the_broker_gives_it_some() -> None:
    sent = encode_messages(TOPIC, tagged("A", "B"), first_id=ids.NO_ID)
    assert check(sent).first_id is None and built_here(sent).first_id is None
    first = ids.mint(2)
    got = decoded(store(with_first_id(sent, first)))
    assert [m.msg_id for m in got] == [ids.client_id_at(first, i) for i in (0, 1)]


def test_our_records_carry_their_first_id_and_consecutive_ids_per_batch() -> None:
    a, b = encode_messages(TOPIC, tagged("A", "B", "C")), encode_messages(TOPIC, tagged("A"))
    first_a, first_b = first_id_in(a), first_id_in(b)
    assert check(a).first_id == first_a == built_here(a).first_id
    assert int.from_bytes(first_b, "big") >= int.from_bytes(first_a, "big") + 3  # one minter: ranges never overlap


# --- from Arrow (the Spark sink) -----------------------------------------------------------


def arrays(n: int, ext_at: int | None = 4) -> MessageArrays:
    """n messages with bodies of growing size, tags "T0"/"T1"/null, one with keys."""
    return MessageArrays(
        pa.array([f"body{i}".encode() * i for i in range(n)], pa.binary()),
        pa.array([None if i % 3 == 0 else f"T{i % 2}" for i in range(n)], pa.string()),
        pa.array([pack_ext(["k"], {"p": "v"}) if i == ext_at else b"" for i in range(n)], pa.binary()),
    )


def without_born_ms(record: bytes) -> bytes:
    """The bytes of a record that do not depend on the clock (born_ms, the first client id, and
    the body CRC over them)."""
    return record[:44] + record[48:56] + record[64:92] + record[108:]


def test_records_split_by_max_bytes_keeping_every_message_in_order() -> None:
    out = list(records(TOPIC, arrays(10), 60))
    assert len(out) > 1 and sum(k for _, k in out) == 10
    assert [header(r)[F_COUNT] for r, _ in out] == [k for _, k in out]
    got = decoded(b"".join(r for r, _ in out))
    assert [m.body for m in got] == [f"body{i}".encode() * i for i in range(10)]


def test_each_record_of_several_messages_fits_max_bytes() -> None:
    for record, k in records(TOPIC, arrays(30), 120):
        if k > 1:  # each message counts its data and 13 bytes of offsets and flags
            assert header(record)[F_SECTION_SIZE] - 12 <= 120


def test_a_message_larger_than_max_bytes_goes_alone() -> None:
    messages = MessageArrays(
        pa.array([b"s", b"L" * 500, b"s"], pa.binary()), pa.nulls(3, pa.string()), pa.array([b""] * 3, pa.binary())
    )
    assert [k for _, k in records(TOPIC, messages, 100)] == [1, 1, 1]


def test_records_split_the_same_way_every_time() -> None:
    first = [(without_born_ms(r), k) for r, k in records(TOPIC, arrays(25), 90, producer=(9, 2))]
    second = [(without_born_ms(r), k) for r, k in records(TOPIC, arrays(25), 90, producer=(9, 2))]
    assert first == second and len(first) > 1


def test_records_number_base_sequence_per_record_with_a_producer() -> None:
    out = list(records(TOPIC, arrays(25), 90, producer=(9, 2)))
    counts = [k for _, k in out]
    assert [header(r)[F_BASE_SEQUENCE] for r, _ in out] == [sum(counts[:i]) for i in range(len(counts))]
    assert {(header(r)[F_PRODUCER_ID], header(r)[F_PRODUCER_EPOCH]) for r, _ in out} == {(9, 2)}


def test_records_without_a_producer_are_not_idempotent() -> None:
    out = list(records(TOPIC, arrays(5), 1 << 20))
    assert [(header(r)[F_PRODUCER_ID], header(r)[F_BASE_SEQUENCE]) for r, _ in out] == [(0, 0)]


def test_records_decode_back_to_the_same_bodies_tags_and_exts() -> None:
    source = arrays(12)
    got = decoded(b"".join(r for r, _ in records(TOPIC, source, 80)))
    assert [m.body for m in got] == source.body.to_pylist()
    assert [m.tags for m in got] == source.tag.to_pylist()
    assert [(m.keys, m.properties) for m in got] == [(["k"], {"p": "v"}) if i == 4 else ([], {}) for i in range(12)]


def test_records_carry_the_tag_summary_of_their_own_messages() -> None:
    messages = MessageArrays(
        pa.array([b"a", b"b", b"c", b"d"], pa.binary()),
        pa.array(["A", "A", None, "B"], pa.string()),
        pa.array([b""] * 4, pa.binary()),
    )
    out = [r for r, _ in records(TOPIC, messages, record_overhead(TOPIC.encode()) + 30)]  # two a record (15 B each)
    assert [tag_summary_of(r) for r in out] == [tag_hash(b"A"), tag_hash(b"B")]


def test_records_of_a_sliced_arrow_array_start_at_the_slice() -> None:
    source = arrays(10)
    sliced = MessageArrays(source.body.slice(3, 5), source.tag.slice(3, 5), source.ext.slice(3, 5))
    got = decoded(b"".join(r for r, _ in records(TOPIC, sliced, 1 << 20)))
    assert [m.body for m in got] == source.body.to_pylist()[3:8]
    assert [m.tags for m in got] == source.tag.to_pylist()[3:8]


@pytest.mark.parametrize("kind", [ZSTD, LZ4])
def test_compressed_records_from_arrow_decode_back(kind: int) -> None:
    source = arrays(12)
    out = list(records(TOPIC, source, 80, compression_kind=kind))
    assert {header(r)[F_ATTRIBUTES] for r, _ in out} == {kind}
    assert [m.body for m in decoded(b"".join(r for r, _ in out))] == source.body.to_pylist()


def test_records_of_no_messages_yield_nothing() -> None:
    assert list(records(TOPIC, arrays(0), 100)) == []


def test_records_from_arrow_pass_the_brokers_check() -> None:
    for record, k in records(TOPIC, arrays(12), 80, producer=(9, 2)):
        assert check(record).count == k


# --- chunk_messages --------------------------------------------------------------------------


def test_chunk_messages_keeps_order_and_puts_a_large_message_alone() -> None:
    sent = [message(b"s" * 10), message(b"s" * 10), message(b"L" * 1000), message(b"s" * 10)]
    chunks = chunk_messages(sent, record_overhead(TOPIC.encode()) + 60)  # 23 bytes a small message
    assert [len(c) for c in chunks] == [2, 1, 1]
    assert [m for c in chunks for m in c] == sent


# --- drop_front ----------------------------------------------------------------------------


def test_drop_front_keeps_the_later_messages_and_moves_the_sequence_on() -> None:
    record = encode_messages(TOPIC, sample_messages(), idempotence=Idempotence(42, 3, 10))
    rest = drop_front(record, 2)
    head = header(rest)
    assert (head[F_COUNT], head[F_PRODUCER_ID], head[F_PRODUCER_EPOCH], head[F_BASE_SEQUENCE]) == (3, 42, 3, 12)
    assert head[F_BORN_MS] == header(record)[F_BORN_MS]
    got = decoded(store(rest))
    sent = sample_messages()[2:]
    assert [(m.body, m.tags, m.keys, m.properties) for m in got] == [
        (m.body, m.tags, m.keys, m.properties) for m in sent
    ]


def test_drop_front_of_nothing_is_the_same_record() -> None:
    record = encode_messages(TOPIC, sample_messages(), idempotence=Idempotence(42, 3, 10))
    assert drop_front(record, 0) == record


def test_drop_front_recomputes_the_tag_summary() -> None:
    record = encode_messages(TOPIC, tagged("A", "B", "B"), idempotence=Idempotence(1, 0, 0))
    assert tag_summary_of(record) & MIXED
    assert tag_summary_of(drop_front(record, 1)) == tag_hash(b"B")
    assert tag_summary_of(drop_front(encode_messages(TOPIC, tagged("A", None)), 1)) == 0


@pytest.mark.parametrize("kind", [ZSTD, LZ4])
def test_drop_front_keeps_the_compression(kind: int) -> None:
    record = encode_messages(TOPIC, sample_messages(), compression_kind=kind, idempotence=Idempotence(5, 1, 0))
    rest = drop_front(record, 4)
    assert header(rest)[F_ATTRIBUTES] == kind and header(rest)[F_BASE_SEQUENCE] == 4
    assert [m.body for m in decoded(store(rest))] == [b"both"]


def test_drop_front_of_a_record_without_a_producer_stays_without_one() -> None:
    rest = drop_front(encode_messages(TOPIC, tagged("A", "B")), 1)
    assert (header(rest)[F_PRODUCER_ID], header(rest)[F_BASE_SEQUENCE]) == (0, 0)
    assert [m.body for m in decoded(store(rest))] == [b"m1"]


def test_drop_front_gives_a_record_the_broker_accepts() -> None:
    rest = drop_front(encode_messages(TOPIC, sample_messages(), idempotence=Idempotence(7, 0, 0)), 3)
    sent = check(rest)
    assert (sent.count, sent.base_sequence, sent.producer_id, sent.topic) == (2, 3, 7, TOPIC.encode())


# --- check_sent: what the broker takes -----------------------------------------------------


def test_check_sent_reports_a_well_formed_batch() -> None:
    record = encode_messages(TOPIC, tagged("A", "A"), idempotence=Idempotence(42, 3, 17))
    sent = check(record)
    assert (sent.count, sent.tag_summary, sent.producer_id, sent.producer_epoch, sent.base_sequence, sent.topic) == (
        2,
        tag_hash(b"A"),
        42,
        3,
        17,
        TOPIC.encode(),
    )


def test_a_record_built_here_reads_as_the_full_check_reads_it() -> None:
    for record in (
        encode_messages(TOPIC, tagged("A", "A"), idempotence=Idempotence(42, 3, 17)),
        encode_messages(TOPIC, sample_messages(), compression_kind=ZSTD),
    ):
        assert built_here(record) == check(record)


def test_check_sent_accepts_compressed_batches_and_unicode_tags() -> None:
    for kind in (NONE, ZSTD, LZ4):
        assert check(encode_messages(TOPIC, sample_messages(), compression_kind=kind)).count == 5


def test_check_sent_refuses_two_records_in_one_send() -> None:
    one = encode_messages(TOPIC, tagged("A"))
    with pytest.raises(BatchRefused, match="exactly one batch record, not 2"):
        check(one + one)


def test_check_sent_refuses_an_empty_send() -> None:
    with pytest.raises(BatchRefused, match="exactly one batch record, not 0"):
        check(b"")


def test_check_sent_refuses_a_body_over_max_body_naming_it() -> None:
    record = encode_messages(TOPIC, [message(b"a"), message(b"x" * 11), message(b"y" * 20)])
    with pytest.raises(BodyTooLarge) as caught:
        check(record, max_body=10)
    assert (caught.value.index, caught.value.size, caught.value.limit) == (1, 11, 10)
    assert "message 1" in str(caught.value) and "11-byte" in str(caught.value)


def test_check_sent_takes_a_body_exactly_at_max_body() -> None:
    assert check(encode_messages(TOPIC, [message(b"x" * 10)]), max_body=10).count == 1


def bodies_alone(count: int) -> bytes:
    """A sent record of ``count`` plain messages of 0 to 4 bytes."""
    return encode_messages(TOPIC, [message(bytes([i % 251]) * (i % 5)) for i in range(count)])


@pytest.mark.parametrize("count", [1, 3, SMALL_BATCH + 72])
def test_a_damaged_record_of_bodies_alone_is_refused_alike_however_it_is_checked(count: int) -> None:
    """Bytes of a plain record's header and section changed one at a time, its CRCs made valid
    again so that only the structure checks can object: the check over its body offsets alone
    takes or refuses what decoding it does, naming the same fault (and, for a few messages,
    what the check message by message does)."""
    record = bodies_alone(count)
    rng = np.random.default_rng(count)
    sec = SECTION_AT + 12 * (count + 1) + count  # past the offsets and flags: the bodies
    places = list(range(BODY_AT, sec)) if count < 10 else rng.choice(np.arange(BODY_AT, sec), 600).tolist()
    outcomes: Counter[str] = Counter()
    for at in places:
        for value in (0, 1, 0xFF, int(rng.integers(256))):
            damaged = bytearray(record)
            damaged[at] = value
            try:
                check(with_crcs(damaged))
                outcomes["taken"] += 1
            except (BatchRefused, BodyTooLarge) as exc:
                outcomes[type(exc).__name__] += 1
    assert outcomes["taken"] and outcomes["BatchRefused"]  # both kinds of outcome were compared


def test_a_record_of_bodies_alone_names_its_first_body_over_the_limit() -> None:
    record = encode_messages(TOPIC, [message(b"a" * (i % 7)) for i in range(SMALL_BATCH + 10)])
    with pytest.raises(BodyTooLarge) as caught:
        check(record, max_body=5)
    assert (caught.value.index, caught.value.size) == (6, 6)
    assert check(record, max_body=6).count == SMALL_BATCH + 10


def test_a_count_over_the_limit_is_refused_alike_by_the_frame_check() -> None:
    """A record of bodies alone of any size reaches ``framed`` (no message-by-message bound
    on its count): it refuses a count over MAX_COUNT as decoding does, before its sizes.
    (A real one is some 218 MB: here the count is patched into a small record.)"""
    record = patched(bodies_alone(3), COUNT_AT, ">I", MAX_COUNT + 1)
    with pytest.raises(RecordCorrupted, match=f"has a count of {MAX_COUNT + 1}$") as decoded_way:
        decode(record)
    with pytest.raises(RecordCorrupted) as framed_way:
        framed(record, HEADER.unpack_from(record), 1 << 24)
    assert str(framed_way.value) == str(decoded_way.value)


def test_a_record_of_bodies_alone_with_a_tag_summary_is_refused() -> None:
    record = patched(bodies_alone(SMALL_BATCH + 1), 80, ">Q", tag_hash(b"A"))  # the tag summary
    with pytest.raises(BatchRefused, match="tag summary does not match"):
        check(record)


@pytest.mark.parametrize(
    "tags",
    [
        [b"\xff"],  # never valid UTF-8
        [b"ok", b"\xc3"],  # a character cut short at the end
        [b"\xc3", b"\xbc"],  # one character split across two tags
        [b"ok", b"\xbcx"],  # starts inside a character
    ],
)
def test_check_sent_refuses_a_tag_that_is_not_utf8(tags: list[bytes]) -> None:
    record = raw_record([b"b"] * len(tags), list(tags), [b""] * len(tags))
    decode(record)  # well formed otherwise: only the UTF-8 check objects
    with pytest.raises(BatchRefused, match="not valid UTF-8"):
        check(record)


@pytest.mark.parametrize(
    ("ext", "fragment"),
    [
        (b"\xc1", "not valid msgpack"),
        (b"\x92\x90", "not valid msgpack"),  # an array of two that ends after one
        (msgpack.packb([[], {}]) + b"\x00", "not valid msgpack"),  # trailing bytes
        (msgpack.packb({"keys": []}), "must be"),
        (msgpack.packb([["k"]]), "must be"),
        (msgpack.packb([{}, []]), "must be"),
        (msgpack.packb(["k", {}]), "must be"),
    ],
)
def test_check_sent_refuses_keys_and_properties_that_are_not_the_msgpack_pair(ext: bytes, fragment: str) -> None:
    record = raw_record([b"a", b"b"], [None, None], [b"", ext])
    with pytest.raises(BatchRefused, match=fragment):
        check(record)


@pytest.mark.parametrize(
    "ext", [msgpack.packb([[1], {}]), msgpack.packb([[], {"p": 2}])], ids=["int key", "int property value"]
)
def test_check_sent_refuses_keys_and_properties_that_are_not_strings(ext: bytes) -> None:
    with pytest.raises(BatchRefused, match="must be strings"):
        check(raw_record([b"a"], [None], [ext]))


def test_check_sent_refuses_a_corrupt_record_as_malformed() -> None:
    record = flipped(encode_messages(TOPIC, tagged("A")), -1)
    with pytest.raises(BatchRefused, match="malformed: body CRC mismatch"):
        check(record)


def test_check_sent_refuses_a_section_over_max_section() -> None:
    record = encode_messages(TOPIC, [message(b"x" * 100)])
    size = header(record)[F_SECTION_SIZE]
    assert check(record, max_section=size).count == 1
    with pytest.raises(BatchRefused):
        check(record, max_section=size - 1)


# --- bad input: decode and check_record ----------------------------------------------------


def test_a_flipped_body_byte_fails_the_body_crc() -> None:
    record = flipped(stored(sample_messages()), -3)
    with pytest.raises(RecordCorrupted, match="body CRC") as caught:
        decode(record)
    assert caught.value.position == 0
    with pytest.raises(RecordCorrupted, match="body CRC"):
        check_record(record, 0, len(record))


@pytest.mark.parametrize("at", [BODY_AT - 4, BODY_AT, COUNT_AT + 3, HEADER_SIZE, SECTION_AT])
def test_any_flipped_byte_the_body_crc_covers_is_caught(at: int) -> None:
    with pytest.raises(RecordCorrupted):
        decode(flipped(stored(sample_messages()), at))


@pytest.mark.parametrize("at", range(BROKER_AT, BROKER_END, 5))
def test_a_flipped_broker_field_byte_fails_the_header_crc(at: int) -> None:
    record = flipped(stored(sample_messages()), at)
    with pytest.raises(RecordCorrupted, match="header CRC"):
        decode(record)
    with pytest.raises(RecordCorrupted, match="header CRC"):
        check_record(record, 0, len(record))


def test_a_corrupt_second_record_is_reported_at_its_position() -> None:
    first = stored(tagged("A"))
    buf = first + flipped(stored(tagged("B")), -1)
    with pytest.raises(RecordCorrupted, match=f"byte {len(first)}") as caught:
        decode(buf)
    assert caught.value.position == len(first)


def test_decode_without_verify_skips_the_crcs() -> None:
    record = flipped(stored(tagged("A")), 20)  # base_offset: the header CRC no longer matches
    assert len(decode(record, verify=False)) == 1


@pytest.mark.parametrize(
    ("count", "fragment"),
    [
        (0, "a count of 0"),
        (1 << 25, "a count of 33554432"),
        (2, "offsets do not add up"),  # the section holds 3: its offset arrays are misread
        (4, "sizes that do not add up"),  # 4 messages need more section than there is
    ],
)
def test_a_count_that_disagrees_with_the_section_is_refused(count: int, fragment: str) -> None:
    record = patched(stored(tagged("A", "B", "C")), COUNT_AT, ">I", count)  # CRCs valid again
    with pytest.raises(RecordCorrupted, match=fragment):
        decode(record)


def body_offset_at(i: int) -> int:
    """Where body offset ``i`` of a TOPIC record lies (little-endian u32s open the section)."""
    return SECTION_AT + 4 * i


def test_body_offsets_that_go_backwards_are_refused() -> None:
    record = stored([message(b"aa"), message(b"bb"), message(b"cc")])  # body offsets 0 2 4 6
    with pytest.raises(RecordCorrupted, match="go backwards"):
        decode(patched(record, body_offset_at(1), "<I", 5))


def test_a_last_offset_that_does_not_add_up_to_the_section_is_refused() -> None:
    record = stored([message(b"aa"), message(b"bb"), message(b"cc")])
    with pytest.raises(RecordCorrupted, match="do not add up"):
        decode(patched(record, body_offset_at(3), "<I", 7))


def test_a_first_offset_that_is_not_zero_is_refused() -> None:
    record = stored([message(b"aa"), message(b"bb"), message(b"cc")])
    with pytest.raises(RecordCorrupted, match="do not add up"):
        decode(patched(record, body_offset_at(0), "<I", 1))


def test_a_tag_without_its_flag_is_refused() -> None:
    record = stored(tagged("A", "B"))
    flags_at = SECTION_AT + 3 * 4 * 3  # after three offset arrays of count + 1
    with pytest.raises(RecordCorrupted, match="flags"):
        decode(patched(record, flags_at, "B", 0))
    with pytest.raises(RecordCorrupted, match="flags"):
        decode(patched(record, flags_at, "B", 0x80))


@pytest.mark.parametrize("kind", [ZSTD, LZ4])
def test_a_compressed_section_that_does_not_decompress_is_refused(kind: int) -> None:
    record = bytearray(store(encode_messages(TOPIC, sample_messages() * 4, compression_kind=kind)))
    record[SECTION_AT:] = b"\x5a" * (len(record) - SECTION_AT)  # garbage, with a valid CRC below
    with pytest.raises(RecordCorrupted, match="damaged"):
        decode(with_crcs(record))


def test_a_compressed_section_of_another_size_than_declared_is_refused() -> None:
    record = store(encode_messages(TOPIC, sample_messages(), compression_kind=ZSTD))
    size = header(record)[F_SECTION_SIZE]
    with pytest.raises(RecordCorrupted):
        decode(patched(record, SECTION_SIZE_AT, ">I", size + 13))


@pytest.mark.parametrize("kind", [ZSTD, LZ4])
@pytest.mark.parametrize("declared", [99, 101, 150])
def test_a_section_is_refused_unless_it_decompresses_to_exactly_its_declared_size(kind: int, declared: int) -> None:
    """An LZ4 section that decompressed short once came back full size, its tail uninitialized."""
    packed = compression.compress(kind, bytes(range(100)))
    assert compression.decompress(kind, packed, 100) == bytes(range(100))
    with pytest.raises(compression.DecompressionFailed, match=f"not {declared}"):
        compression.decompress(kind, memoryview(packed), declared)


def test_an_unknown_compression_is_refused() -> None:
    record = store(encode_messages(TOPIC, sample_messages(), compression_kind=ZSTD))
    with pytest.raises(RecordCorrupted, match="unknown compression 3"):
        decode(patched(record, ATTRIBUTES_AT, "B", 3))


def test_a_section_over_max_section_is_refused() -> None:
    record = stored([message(b"x" * 100)])
    size = header(record)[F_SECTION_SIZE]
    assert len(decode(record, max_section=size)) == 1
    with pytest.raises(RecordCorrupted):
        decode(record, max_section=size - 1)


def test_a_compressed_section_claiming_more_than_max_section_is_refused_before_decompressing() -> None:
    record = store(encode_messages(TOPIC, sample_messages(), compression_kind=LZ4))
    with pytest.raises(RecordCorrupted, match="over the limit of"):
        decode(patched(record, SECTION_SIZE_AT, ">I", (1 << 30) + 1))


@pytest.mark.parametrize("version", [0, 1, 4, 255])
def test_an_unknown_version_is_refused(version: int) -> None:
    record = patched(stored(tagged("A")), VERSION_AT, "B", version)
    with pytest.raises(RecordCorrupted, match=f"version {version}"):
        decode(record)
    with pytest.raises(RecordCorrupted, match=f"version {version}"):
        check_record(record, 0, len(record))


def test_a_bad_magic_is_refused() -> None:
    record = stored(tagged("A"))
    bad = patched(record, 4, ">I", 0xDEADBEEF)
    with pytest.raises(RecordCorrupted, match="magic 0xDEADBEEF"):
        decode(bad)
    with pytest.raises(RecordCorrupted, match="magic"):
        check_record(bad, 0, len(bad))


@pytest.mark.parametrize("keep", [1, 4, 7, HEADER_SIZE - 1, HEADER_SIZE, -1])
def test_a_truncated_buffer_is_refused(keep: int) -> None:
    record = stored(sample_messages())
    cut = record[:keep]
    with pytest.raises(RecordCorrupted):
        decode(cut)
    with pytest.raises(RecordCorrupted):
        check_record(cut, 0, len(cut))


def test_a_truncated_second_record_is_refused_at_its_position() -> None:
    first = stored(tagged("A"))
    with pytest.raises(RecordCorrupted) as caught:
        decode(first + stored(tagged("B"))[:-1])
    assert caught.value.position == len(first)


@pytest.mark.parametrize("total", [0, HEADER_SIZE - 1])
def test_a_total_size_below_the_header_is_refused(total: int) -> None:
    record = patched(stored(tagged("A")), 0, ">I", total)
    with pytest.raises(RecordCorrupted):
        decode(record)
    with pytest.raises(RecordCorrupted, match="impossible record size"):
        check_record(record, 0, len(record))


def test_check_sent_refuses_a_tag_summary_that_does_not_match_the_tags() -> None:
    record = bytearray(encode_messages(TOPIC, tagged("A")))
    record[80:88] = (0).to_bytes(8, "big")  # "no message is tagged": filtered readers would skip it
    record[44:48] = zlib.crc32(record[48:]).to_bytes(4, "big")
    with pytest.raises(BatchRefused, match="tag summary does not match"):
        check(bytes(record))


def test_a_batch_of_messages_with_large_properties_is_split_to_fit_its_limit() -> None:
    sent = [Message(TOPIC, b"x", properties={"p": "v" * 10_000}) for _ in range(40)]
    chunks = chunk_messages(sent, 100_000)
    assert sum(len(c) for c in chunks) == 40 and len(chunks) > 1
    assert all(len(encode_messages(TOPIC, list(c))) <= 100_000 for c in chunks)


@pytest.mark.parametrize(
    ("bodies", "tags", "exts"),
    [
        ([b"one"], None, None),  # one plain message: its own short path
        ([b""], None, None),
        ([b"one"], None, [b""]),
        ([b"one"], [None], None),
        ([b"a", b"", b"ccc"], ["x", None, ""], [b"", msgpack.packb([["k"], {}]), b""]),
        ([b"b" * 100] * 16, ["t"] * 16, None),
        ([b"b"] * 17, [None] * 16 + ["late"], [b""] * 17),  # past SMALL_SECTION: numpy
    ],
)
def test_a_small_section_is_laid_out_byte_for_byte_as_numpy_lays_it_out(
    bodies: list[bytes], tags: list[str | None] | None, exts: list[bytes] | None
) -> None:
    section = build_section(bodies, tags, exts)
    n = len(bodies)
    encoded = None if tags is None else [b"" if t is None else t.encode() for t in tags]
    expected = join_section(
        np.array([len(b) for b in bodies], dtype=np.int64),
        b"".join(bodies),
        None if encoded is None else np.array([len(t) for t in encoded], dtype=np.int64),
        b"" if encoded is None else b"".join(encoded),
        np.array([len(e) for e in exts], dtype=np.int64) if exts and any(exts) else None,
        b"".join(exts) if exts else b"",
        None if tags is None else np.array([t is not None for t in tags], dtype=np.uint8),
    )
    assert section.data == expected and section.count == n
    assert decode(encode_batch(TOPIC.encode(), section)).body_len.tolist() == [len(b) for b in bodies]


def test_a_batch_compressed_to_fewer_bytes_than_messages_is_refused() -> None:
    """A message's offset id lies inside its batch's bytes (codec.ids), so a batch must have at
    least as many bytes as messages; a hand-made record past that is refused, not stored."""
    section = build_section([b""] * 20_000)
    record = encode_batch(b"T", section, compression_kind=ZSTD)
    assert len(record) >= 20_000  # our encoder does not compress past it: it sends the section plain
    packed = compression.compress(ZSTD, section.data)
    head = PRODUCER_FIELDS.pack(
        VERSION, ZSTD, 1, 20_000, 0, 0, 0, 0, section.tag_summary, len(section.data), ids.mint()
    )
    body_crc = zlib.crc32(packed, zlib.crc32(b"T", zlib.crc32(head)))
    total = HEADER_SIZE + 1 + len(packed)
    forged = HEADER.pack(
        total,
        BATCH_MAGIC,
        zlib.crc32(BROKER_FIELDS.pack(0, 0, 0, 0, 0)),
        0,
        0,
        0,
        0,
        0,
        body_crc,
        *PRODUCER_FIELDS.unpack(head),
    )
    with pytest.raises(BatchRefused, match=r"20000 messages in \d+ bytes: compressed past one byte per message"):
        check_sent(forged + b"T" + packed, max_body=1 << 20, max_section=1 << 24)


@pytest.mark.parametrize("n", [SMALL_BATCH - 28, SMALL_BATCH, SMALL_BATCH + 1])
def test_batches_of_a_hundred_are_judged_alike_message_by_message_and_with_numpy(n: int) -> None:
    """A producer's usual batch of 100 is checked message by message now: tags, keys,
    properties, a delay, the largest body and bad tags each answered as numpy answers them."""
    sent = [
        message(b"m%d" % i, tags=f"t{i % 3}", keys=["k"] if i % 7 == 0 else [], properties={"p": "v"} if i % 9 else {})
        for i in range(n)
    ]
    sent[41] = message(b"late", properties={"DELAY": "3"})
    assert check(encode_messages(TOPIC, sent)).count == n
    large = [*sent[:73], message(b"x" * 11), *sent[74:]]
    with pytest.raises(BodyTooLarge):
        check(encode_messages(TOPIC, large), max_body=10)
    bodies = [m.body for m in sent]
    with pytest.raises(BatchRefused, match="not valid UTF-8"):
        check(raw_record(bodies, [b"ok"] * (n - 1) + [b"\xff"], [b""] * n))


def test_the_header_field_positions_name_the_fields_the_layout_has() -> None:
    """``layout.F_*`` (what readers index ``HEADER.unpack``'s tuple with) against the numpy row
    type's own names, which share the first 19 positions; the client id is the tuple's last."""
    named = {
        "total": F_TOTAL,
        "magic": F_MAGIC,
        "header_crc": F_HEADER_CRC,
        "queue_id": F_QUEUE_ID,
        "base_offset": F_BASE_OFFSET,
        "commitlog_offset": F_LOG_OFFSET,
        "store_ms": F_STORE_MS,
        "body_crc": F_BODY_CRC,
        "version": F_VERSION,
        "attributes": F_ATTRIBUTES,
        "topic_len": F_TOPIC_LEN,
        "count": F_COUNT,
        "born_ms": F_BORN_MS,
        "producer_id": F_PRODUCER_ID,
        "producer_epoch": F_PRODUCER_EPOCH,
        "base_sequence": F_BASE_SEQUENCE,
        "tag_summary": F_TAG_SUMMARY,
        "section_size": F_SECTION_SIZE,
    }
    assert {name: HEADER_DTYPE.names.index(name) for name in named} == named
    assert len(HEADER.unpack(bytes(HEADER_SIZE))) - 1 == F_FIRST_ID
