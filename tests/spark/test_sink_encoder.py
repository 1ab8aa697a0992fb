"""The sink's encoder and sends without Spark: every row shape is encoded as the producer
encodes a message and lands on the queue the producer's rules give; sends are batch records
split by bytes and numbered for the broker's dedupe (a recording stand-in for the producer)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pytest

from rocketspark.client.selection import queue_for_key
from rocketspark.codec.build import pack_ext
from rocketspark.codec.columns import decode
from rocketspark.codec.messages import to_messages
from rocketspark.errors import OptionError
from rocketspark.protocol.types import SendResult, SendStatus
from rocketspark.spark.options import WriterOptions
from rocketspark.spark.sink import Batcher, producer_id

Row = tuple[bytes, str | None, bytes]  # body, tag, packed keys and properties

NS = "127.0.0.1:9876"


@dataclass
class Recorder:
    """Stands in for the Producer (a ``QueueSender``): a fixed queue count per topic, and every
    send recorded."""

    queues: int = 4
    sends: list[tuple[str, int, bytes]] = field(default_factory=list)

    def queue_count(self, topic: str) -> int:
        return self.queues

    def send_to_queue(self, topic: str, queue_id: int, record: bytes) -> SendResult:
        self.sends.append((topic, queue_id, record))
        return SendResult(SendStatus.SEND_OK, "", topic, "b", queue_id, 0, count=len(decode(record)))


def rows_of(one: Batcher) -> dict[tuple[str, int], list[Row]]:
    """What the batcher holds, per (topic, queue), as (body, tag, ext) rows."""
    out: dict[tuple[str, int], list[Row]] = {}
    for key, parts in one.queues.items():
        for part in parts:
            out.setdefault(key, []).extend(
                zip(part.body.to_pylist(), part.tag.to_pylist(), part.ext.to_pylist(), strict=True)
            )
    return out


def batcher(recorder: Recorder, roles: list[str], partition: int = 0, **options: Any) -> Batcher:
    writer = WriterOptions(nameservers=(NS,), **options)
    return Batcher(recorder, writer, {role.lower(): role for role in roles}, partition)


def test_round_robin_starts_at_the_task_partition() -> None:
    """Every task used to send its first row to queue 0."""
    queues = set()
    for partition in range(4):
        one = batcher(Recorder(), ["body"], partition, topic="t")
        one.add(pa.RecordBatch.from_pydict({"body": [b"x"]}))
        queues |= {q for _, q in one.queues}
    assert queues == {0, 1, 2, 3}


def test_every_row_shape_is_encoded_as_the_producer_does_and_lands_on_its_queue() -> None:
    rows = {
        "value": ["a", "bb", None, "dddd", "e", "f"],
        "topic": ["x", "y", "x", "x", "y", "x"],
        "tag": ["T", None, "", "T", None, "U"],
        "keys": [["k1", "k2"], None, [], ["k3"], None, None],
        "properties": [{"p": "1"}, None, {}, None, {"q": "2"}, None],
        "queueId": [None, 3, None, None, None, 1],
        "shardingKey": [None, None, "user-7", "user-7", None, "ignored: queueId wins"],
    }
    schema = pa.schema(
        [
            ("value", pa.string()),
            ("topic", pa.string()),
            ("tag", pa.string()),
            ("keys", pa.list_(pa.string())),
            ("properties", pa.map_(pa.string(), pa.string())),
            ("queueId", pa.int32()),
            ("shardingKey", pa.string()),
        ]
    )
    one = batcher(Recorder(queues=4), list(rows), partition=1, tag="default")
    one.add(pa.RecordBatch.from_pydict(rows, schema=schema))
    keyed = queue_for_key("user-7", 4)
    expected: dict[tuple[str, int], list[Row]] = {}
    for i, queue in enumerate([(1 + 0) % 4, 3, keyed, keyed, (1 + 4) % 4, 1]):
        tag = rows["tag"][i] if rows["tag"][i] is not None else "default"
        properties = dict(rows["properties"][i] or {})
        if rows["shardingKey"][i] is not None:  # the message group the official consumers see
            properties["__SHARDINGKEY"] = rows["shardingKey"][i]
        ext = pack_ext(list(rows["keys"][i] or ()), properties)
        expected.setdefault((rows["topic"][i], queue), []).append(((rows["value"][i] or "").encode(), tag, ext))
    assert rows_of(one) == expected


def test_a_null_topic_is_an_error_naming_the_row() -> None:
    one = batcher(Recorder(), ["body", "topic"])
    one.add(pa.RecordBatch.from_pydict({"body": [b"a"], "topic": ["t"]}))
    with pytest.raises(OptionError, match="row 2 has no topic"):
        one.add(pa.RecordBatch.from_pydict({"body": [b"b", b"c"], "topic": ["t", None]}))


def test_a_key_given_as_a_string_and_properties_alone_are_encoded() -> None:
    one = batcher(Recorder(queues=1), ["body", "keys", "properties"], topic="t")
    batch = pa.RecordBatch.from_pydict(
        {"body": [b"a", b"b", b"c"], "keys": ["k", None, None], "properties": [None, [("p", "1")], None]},
        schema=pa.schema(
            [("body", pa.binary()), ("keys", pa.string()), ("properties", pa.map_(pa.string(), pa.string()))]
        ),
    )
    one.add(batch)
    assert rows_of(one)[("t", 0)] == [
        (b"a", None, pack_ext(["k"], {})),
        (b"b", None, pack_ext([], {"p": "1"})),
        (b"c", None, b""),
    ]


def test_sends_are_split_by_bytes_and_numbered_by_position_in_the_queue() -> None:
    recorder = Recorder(queues=1)
    one = batcher(recorder, ["body"], topic="t", batch_max_bytes=1024)
    one.add(pa.RecordBatch.from_pydict({"body": [bytes([i]) * 300 for i in range(7)]}))
    assert one.send("spark:q:5:0") == (7, 0)
    heads = [decode(record).heads.rows[0] for _, _, record in recorder.sends]
    assert [(int(h["count"]), int(h["producer_id"]), int(h["base_sequence"])) for h in heads] == [
        (2, producer_id("spark:q:5:0"), 0),
        (2, producer_id("spark:q:5:0"), 2),
        (2, producer_id("spark:q:5:0"), 4),
        (1, producer_id("spark:q:5:0"), 6),
    ]
    assert all(len(record) <= 1024 for _, _, record in recorder.sends)  # whole records, header included
    bodies = [m.body for _, _, record in recorder.sends for m in to_messages(decode(record), "t", "b", bytes(8))]
    assert bodies == [bytes([i]) * 300 for i in range(7)]


def test_a_tag_longer_than_a_record_holds_is_refused() -> None:
    one = batcher(Recorder(), ["body", "tag"], topic="t")
    with pytest.raises(OptionError, match="row 0 has a tag of 70000 bytes"):
        one.add(pa.RecordBatch.from_pydict({"body": [b"a"], "tag": ["x" * 70_000]}))
