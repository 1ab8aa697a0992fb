"""Message trace's pieces without processes: the trace flag kept in topics.json (files of
before it load), the recorder's buffer and its flush into RMQ_SYS_TRACE_TOPIC, and the rows a
trace message gives."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from broker import trace
from broker.topics import TopicTable
from broker.trace import TraceRecorder, TraceSettings
from rocketspark.codec.build import encode_messages, stamped_head
from rocketspark.codec.columns import decode
from rocketspark.codec.layout import BODY_AT
from rocketspark.codec.messages import to_messages
from rocketspark.protocol.codes import ResponseCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.trace import (
    ACKNOWLEDGED,
    TRACE_TOPIC,
    TraceEvent,
    acknowledgement,
    commit_key,
    events_of,
    record_key,
)
from rocketspark.protocol.types import Message, MessageExt, Perm, TopicConfig


class Office:
    def __init__(self) -> None:
        self.is_master = True


class Log:
    log_max_offset = 4096


def recorder(
    tmp_path: Path, *, everything: bool = False, max_bytes: int = 1 << 20
) -> tuple[TraceRecorder, list[RemotingCommand], Office]:
    topics = TopicTable(tmp_path / "topics.json", "broker-a")
    topics.put(TopicConfig("traced", 2, 2, Perm.READ_WRITE, trace=True), 0)
    topics.put(TopicConfig("plain", 2, 2, Perm.READ_WRITE), 0)
    written: list[RemotingCommand] = []

    async def serve(request: RemotingCommand) -> RemotingCommand:
        written.append(request)
        return request.response(ResponseCode.SUCCESS)

    office = Office()
    settings = TraceSettings(everything=everything, max_pending_bytes=max_bytes)
    return TraceRecorder("broker-a", topics, serve, office, Log(), settings), written, office


def test_a_topics_file_of_before_trace_loads_and_the_flag_survives_a_reload(tmp_path: Path) -> None:
    path = tmp_path / "topics.json"
    path.write_text(json.dumps({"topics": [{"name": "old", "r": 4, "w": 4, "perm": 6, "since": 0}], "version": 1}))
    table = TopicTable(path, "broker-a")
    table.load()
    assert table.get("old") == TopicConfig("old", 4, 4, Perm.READ_WRITE, trace=False)
    table.put(TopicConfig("new", 1, 1, Perm.READ_WRITE, trace=True), 0)  # a journal line
    again = TopicTable(path, "broker-a")
    again.load()
    assert again.get("new") is not None and again.get("new").trace  # type: ignore[union-attr]
    assert TopicConfig.from_wire({"name": "x", "r": 1, "w": 1, "perm": 6}).trace is False
    assert "trace" not in TopicConfig("x").to_wire()  # peers of before read the same


def test_what_is_traced(tmp_path: Path) -> None:
    rec, _, _ = recorder(tmp_path)
    assert rec.traced_topic("traced") and not rec.traced_topic("plain") and not rec.traced_topic("missing")
    every, _, _ = recorder(tmp_path / "all", everything=True)
    assert every.traced_topic("plain")
    every.topics.put(TopicConfig(TRACE_TOPIC, 1, 1, Perm.READ_WRITE), 0)
    assert not every.traced_topic(TRACE_TOPIC)  # never itself


def test_a_flush_stores_one_trace_message_per_record_keyed_by_its_place(tmp_path: Path) -> None:
    rec, written, _ = recorder(tmp_path)
    rec.sent("traced", 1, 10, 8192, 1000, "AB" * 16, 111, 1.5, "", "10.0.0.1:5000")
    sent = encode_messages("traced", [Message("traced", b"x")] * 5)
    stored = stamped_head(sent, 1, 20, 12288, 222) + sent[BODY_AT:]
    rec.delivered("traced", 1, 22, stored, "g", "10.0.0.2:6000", "pull")  # read from the third on
    asyncio.run(rec.flush())
    [request] = written
    assert rec.topics.get(TRACE_TOPIC) is not None  # created on first use
    messages = to_messages(decode(request.body), TRACE_TOPIC, "broker-a", bytes(8))
    assert [m.keys for m in messages] == [[record_key("broker-a", 8192)], [record_key("broker-a", 12288)]]
    bodies = [json.loads(m.body) for m in messages]
    assert [b["traceType"] for b in bodies] == ["Pub", "SubBefore"]
    pub, sub = bodies
    assert (pub["recordOffset"], pub["count"], pub["queueOffset"]) == (8192, 1000, 10)
    assert (sub["recordOffset"], sub["index"], sub["count"], sub["queueOffset"]) == (12288, 2, 3, 22)
    assert rec.recorded == 2
    rows = events_of(pub, 41)
    assert [r.event for r in rows] == ["sent", "stored"] and rows[1].queue_offset == 51 and rows[0].time_ms == 111


def test_a_slave_records_nothing_and_a_full_buffer_drops(tmp_path: Path) -> None:
    rec, written, office = recorder(tmp_path)
    office.is_master = False
    rec.sent("traced", 0, 0, 0, 1, "", 0, 0.1, "", "")
    asyncio.run(rec.flush())
    assert not written and rec.dropped == 1
    rec.pending = [("x",)] * trace.MAX_PENDING
    rec.sent("traced", 0, 0, 0, 1, "", 0, 0.1, "", "")
    assert rec.dropped == 2 and len(rec.pending) == trace.MAX_PENDING


def test_a_pull_is_buffered_without_its_answer_and_noted_messages_are_bounded_by_bytes(tmp_path: Path) -> None:
    rec, _, _ = recorder(tmp_path, max_bytes=12_000)
    sent = encode_messages("traced", [Message("traced", b"x" * 30_000)])
    stored = stamped_head(sent, 1, 0, 0, 1) + sent[BODY_AT:]
    rec.delivered("traced", 1, 0, stored, "g", "c", "pull")  # an answer bigger than the whole bound
    assert len(rec.pending) == 1 and rec.pending_bytes < 1000 and rec.dropped == 0  # where, not the bytes
    big = MessageExt("traced", 1, 0, b"y" * 3000, None, None, None, 0, 0, 0, "broker-a")
    for _ in range(5):
        rec.noted("retried", big, "g", "c", "sent back")
    assert len(rec.pending) == 4 and rec.dropped == 2 and rec.pending_bytes <= 12_000
    asyncio.run(rec.flush())
    assert rec.pending_bytes == 0 and rec.recorded == 4
    rec.noted("retried", big, "g", "c", "sent back")  # room again once flushed
    assert len(rec.pending) == 1 and rec.dropped == 2


def test_a_commit_is_keyed_by_queue_group_and_minute_and_acknowledges_what_is_before_it(tmp_path: Path) -> None:
    rec, written, _ = recorder(tmp_path)
    rec.committed("traced", 1, "g", 25, "10.0.0.2:6000")
    asyncio.run(rec.flush())
    [message] = to_messages(decode(written[0].body), TRACE_TOPIC, "broker-a", bytes(8))
    fields = json.loads(message.body)
    assert message.keys == [commit_key("broker-a", "traced", 1, "g", fields["timeStamp"])]
    assert fields["traceType"] == "Commit" and fields["commitOffset"] == 25
    delivered = TraceEvent(fields["timeStamp"] - 5, "delivered", "broker-a", "traced", 1, 24, "g", "c", None, "")
    ack = acknowledgement(fields, delivered)
    assert ack is not None and ack.event == ACKNOWLEDGED and ack.queue_offset == 24 and ack.group == "g"
    past = TraceEvent(fields["timeStamp"] - 5, "delivered", "broker-a", "traced", 1, 25, "g", "c", None, "")
    other = TraceEvent(fields["timeStamp"] - 5, "delivered", "broker-a", "traced", 1, 3, "h", "c", None, "")
    assert acknowledgement(fields, past) is None and acknowledgement(fields, other) is None
