"""Message trace recorded by the broker (issue 30), on real processes: a traced topic's
message shows sent, stored and delivered, whichever client sent and read it; an untraced
topic records nothing; ``trace_enable = true`` traces every topic."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from rocketmq import (
    ClientConfiguration,
    Credentials,
    FilterExpression,
    SimpleConsumer,
    TransactionChecker,
    TransactionResolution,
)
from rocketmq import Message as V2Message
from rocketmq import Producer as V2Producer

from rocketspark import Admin, Consumer, LocalCluster, Message, Producer
from rocketspark.errors import MessageNotFoundError
from rocketspark.protocol.trace import ACKNOWLEDGED, READ_AHEAD, TraceEvent
from rocketspark.rocketmq4 import records
from rocketspark.rocketmq4.codes import Code
from tests import rocketmq4
from tests.docblocks import blocks_run_by
from tests.helpers import eventually

pytestmark = pytest.mark.integration

DOCS_ID = "C0A80002A1B2C3D4E5F60718293A4B5C"  # the sample id of docs/operations/trace.md
DELAYED_ID = "7F00000100002A9F0000000000000D1A"  # a 4.x client's id (UNIQ_KEY) of a delay message


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    config = {"auto_create_topic_enable": False, "message_delay_level": " ".join(["1s"] * 18)}  # fast retries
    with LocalCluster(brokers=2, processes=True, broker_config=config) as c:
        with Admin(c.nameserver) as admin:
            admin.create_topic("traced", queues=2, trace=True)
            admin.create_topic("plain", queues=2)
        yield c


def trace(admin: Admin, msg_id: str, *wanted: str) -> list[TraceEvent]:
    """The message's trace once it shows every event in ``wanted`` (stored within a fraction
    of a second, indexed about a second later)."""

    def complete() -> list[TraceEvent] | None:
        try:
            events = admin.message_trace(msg_id)
        except MessageNotFoundError:  # the message itself not indexed yet
            return None
        return events if set(wanted) <= {e.event for e in events} else None

    found: list[TraceEvent] = eventually(complete, timeout_s=20, interval_s=0.2)
    return found


def found(admin: Admin, msg_id: str) -> bool:
    try:
        return bool(admin.query_message_by_id(msg_id))
    except MessageNotFoundError:
        return False


def read_all(consumer: Consumer, topic: str) -> int:
    return sum(len(consumer.pull(topic, q, 0, 1000).messages) for q in range(len(consumer.queues(topic))))


def test_our_clients_message_shows_sent_by_its_group_stored_delivered_and_acknowledged(cluster: LocalCluster) -> None:
    ns = cluster.nameserver
    labels = {"consumerGroup": "trace-cg"}
    with Producer(ns, group="trace-pg") as producer, Consumer(ns, labels=labels) as consumer, Admin(ns) as admin:
        one = producer.send(Message("traced", b"single", queue_id=0))
        batch = producer.send_batch([Message("traced", f"b{i}".encode(), queue_id=1) for i in range(100)])[0]
        assert read_all(consumer, "traced") >= 101
        events = trace(admin, one.msg_id, "sent", "stored", "delivered")
        assert [e.event for e in events][:3] == ["sent", "stored", "delivered"]
        sent, stored = events[0], events[1]
        consumer.commit_offset("trace-cg", "traced", stored.queue_id, one.queue_offset + 1, broker_name=stored.broker)
        events = trace(admin, one.msg_id, ACKNOWLEDGED)
        assert (stored.topic, stored.queue_id, stored.queue_offset) == ("traced", 0, one.queue_offset)
        assert stored.cost_ms is not None and stored.cost_ms >= 0 and stored.client
        assert sent.group == "trace-pg" and sent.client.startswith(f"{producer.client_id} at ")  # from its heartbeat
        assert events == sorted(events, key=lambda e: e.time_ms)
        [ack] = [e for e in events if e.event == ACKNOWLEDGED]
        assert (ack.group, ack.queue_offset) == ("trace-cg", one.queue_offset)
        assert ack.detail == f"offset {one.queue_offset + 1} committed" and ack.client
        # the 42nd of a batch: its own queue offset, found by its offset id as well
        copy = admin.query_message_by_id(batch.msg_ids()[41])
        events = trace(admin, copy.offset_msg_id, "sent", "stored", "delivered")
        assert {e.queue_offset for e in events} == {batch.queue_offset + 41}


def test_a_rocketmq_4_clients_message_shows_its_groups_and_its_retry(cluster: LocalCluster) -> None:
    ns = cluster.nameserver
    with Admin(ns) as admin:
        admin.create_topic("ons-traced", queues=1, brokers=["broker-a"], trace=True)
    options = {"nameSrv": ns, "topic": "ons-traced", "group": "ons-trace-g", "fail": {"times": 1}, "until": 1}
    with rocketmq4.Consumer({**options, "seconds": 120}) as consumer:
        eventually(lambda: consumer.ready, 60)
        [sent] = [
            s
            for s in rocketmq4.produce({"nameSrv": ns, "topic": "ons-traced", "count": 1, "group": "ONS_P"})
            if "msgId" in s
        ]
        consumer.wait(90)
    with Admin(ns) as admin:
        events = trace(admin, sent["msgId"], "sent", "stored", "delivered", "retried")
    by_event = {e.event: e for e in events}
    assert by_event["sent"].group == "ONS_P" and by_event["sent"].client.endswith("(JAVA)")  # as ali-ons says
    assert by_event["delivered"].group == "ons-trace-g" and by_event["delivered"].detail == "by 4.x pull"
    assert by_event["retried"].group == "ons-trace-g" and "%RETRY%ons-trace-g" in by_event["retried"].detail
    assert [e.event for e in events].index("retried") > [e.event for e in events].index("delivered")
    with Admin(ns) as admin:  # it acknowledged its (retried) delivery by committing its offset
        events = trace(admin, sent["msgId"], ACKNOWLEDGED)
    assert {e.group for e in events if e.event == ACKNOWLEDGED} == {"ons-trace-g"}


def test_an_official_v2_clients_message_shows_its_pop_delivery_and_ack(cluster: LocalCluster) -> None:
    config = ClientConfiguration(cluster.grpc_endpoint, Credentials())
    producer = V2Producer(config, ("traced",))
    producer.startup()
    try:
        message = V2Message()
        message.topic, message.body = "traced", b"from v2"
        msg_id = producer.send(message).message_id
    finally:
        producer.shutdown()
    consumer = SimpleConsumer(config, "v2-trace-g", {"traced": FilterExpression()}, await_duration=2)
    consumer.startup()
    try:
        got: list[Any] = []
        deadline = time.monotonic() + 30
        while not any(m.message_id == msg_id for m in got) and time.monotonic() < deadline:
            for received in consumer.receive(16, 20):
                got.append(received)
                consumer.ack(received)
    finally:
        consumer.shutdown()
    with Admin(cluster.nameserver) as admin:
        events = trace(admin, msg_id, "sent", "stored", "delivered", "acked")
    popped = [e for e in events if e.group == "v2-trace-g"]
    assert [e.event for e in popped] == ["delivered", "acked"]
    assert popped[0].detail == "by v2 pop, attempt 1" and popped[0].client  # the v2 client's id
    sent = events[0]
    assert sent.event == "sent" and sent.group == "traced"  # a v5 producer is known under the topics it sends to
    assert " at " in sent.client  # its client id (x-mq-client-id), at the endpoint
    assert not any(e.detail == f"by {READ_AHEAD}" for e in events)  # the endpoint's read-ahead is no delivery


class RollBack(TransactionChecker):
    def check(self, message: V2Message) -> TransactionResolution:
        return TransactionResolution.ROLLBACK


def test_a_v5_delay_message_and_transactions_show_their_resolution(cluster: LocalCluster) -> None:
    producer = V2Producer(ClientConfiguration(cluster.grpc_endpoint, Credentials()), ("traced",), RollBack())
    producer.startup()
    try:
        delayed = V2Message()
        delayed.topic, delayed.body = "traced", b"later"
        delayed.delivery_timestamp = int(time.time() * 1000) + 1000  # milliseconds, as its docs show
        delayed_id = producer.send(delayed).message_id
        ids = {}
        for ending in ("commit", "rollback"):
            half = V2Message()
            half.topic, half.body = "traced", ending.encode()
            transaction = producer.begin_transaction()
            ids[ending] = producer.send(half, transaction).message_id
            transaction.commit() if ending == "commit" else transaction.rollback()
    finally:
        producer.shutdown()
    with Admin(cluster.nameserver) as admin:
        events = trace(admin, delayed_id, "scheduled", "delivered to its topic", "stored")
        scheduled = next(e for e in events if e.event == "scheduled")
        assert scheduled.detail.startswith("due at ") and scheduled.detail.endswith("for traced")
        assert [e.event for e in events].index("scheduled") < [e.event for e in events].index("delivered to its topic")
        committed = trace(admin, ids["commit"], "prepared", "committed", "stored")
        assert [e.event for e in committed].index("prepared") < [e.event for e in committed].index("committed")
        rolled = trace(admin, ids["rollback"], "prepared", "rolled back")
        assert "stored" not in {e.event for e in rolled}


def test_a_rocketmq_4_delay_level_shows_scheduled_and_delivered(cluster: LocalCluster) -> None:
    with rocketmq4.RawClient(cluster.brokers["broker-a"]) as client:  # as Java's client sends it, level 1: 1 s here
        header = {"a": "raw-pg", "b": "traced", "c": "TBW102", "d": 4, "e": 0, "f": 0, "g": int(time.time() * 1000)}
        header |= {"h": 0, "i": records.properties_string({"DELAY": "1", "UNIQ_KEY": DELAYED_ID}), "j": 0, "k": "false"}
        assert client.call(Code.SEND_MESSAGE_V2, header, b"later").code == 0
    with Admin(cluster.nameserver) as admin:
        events = trace(admin, DELAYED_ID, "scheduled", "delivered to its topic", "stored")
    scheduled = next(e for e in events if e.event == "scheduled")
    assert scheduled.detail.startswith("due at ") and scheduled.detail.endswith("for traced")


def test_an_untraced_topic_records_nothing(cluster: LocalCluster) -> None:
    ns = cluster.nameserver
    with Producer(ns) as producer, Consumer(ns) as consumer, Admin(ns) as admin:
        sent = producer.send(Message("plain", b"quiet", queue_id=0))
        read_all(consumer, "plain")
        eventually(lambda: found(admin, sent.msg_id), timeout_s=15)
        traced = producer.send(Message("traced", b"after", queue_id=0))  # a traced one after it, as a clock
        trace(admin, traced.msg_id, "stored")
        assert admin.message_trace(sent.msg_id) == []


def test_cli_prints_the_trace_as_a_table_and_json(cluster: LocalCluster) -> None:
    """The commands of docs/operations/trace.md, with a real message's id for the sample one."""
    ns = cluster.nameserver
    with Producer(ns) as producer, Admin(ns) as admin:
        sent = producer.send(Message("traced", b"for the cli", queue_id=1))
        trace(admin, sent.msg_id, "stored")
    [block] = blocks_run_by("tests/integration/test_trace.py::test_cli_prints_the_trace_as_a_table_and_json")
    table_line, json_line = [line.split("#")[0].replace(DOCS_ID, sent.msg_id) for line in block.text.splitlines()]
    env = {**os.environ, "ROCKETSPARK_NAMESRV": ns, "COLUMNS": "250"}

    def run(line: str) -> str:
        command = [sys.executable, "-m", "rocketspark.cli", *shlex.split(line)[1:]]
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, env=env)
        assert done.returncode == 0, done.stderr
        return done.stdout

    shown = run(table_line)
    assert "stored" in shown and "traced" in shown and "broker-" in shown
    rows = json.loads(run(json_line))["tables"][0]["rows"]
    assert [r["event"] for r in rows][:2] == ["sent", "stored"]


def test_trace_enable_traces_every_topic(make_cluster: Callable[..., LocalCluster]) -> None:
    cluster = make_cluster(processes=True, broker_config={"trace_enable": True})
    ns = cluster.nameserver
    with Admin(ns) as admin, Producer(ns) as producer, Consumer(ns) as consumer:
        admin.create_topic("everything", queues=1)
        sent = producer.send(Message("everything", b"x"))
        read_all(consumer, "everything")
        events = trace(admin, sent.msg_id, "sent", "stored", "delivered")
        assert all(e.topic == "everything" for e in events)
