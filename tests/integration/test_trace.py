"""Message trace recorded by the broker (issue 30), on real processes: a traced topic's
message shows sent, stored and delivered, whichever client sent and read it; an untraced
topic records nothing; ``trace_enable = true`` traces every topic."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator

import pytest

from rocketspark import Admin, Consumer, LocalCluster, Message, Producer
from rocketspark.errors import MessageNotFoundError
from rocketspark.protocol.trace import TraceEvent
from tests import rocketmq4
from tests.helpers import eventually

pytestmark = pytest.mark.integration


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


def test_our_clients_message_shows_sent_stored_and_delivered(cluster: LocalCluster) -> None:
    ns = cluster.nameserver
    with Producer(ns) as producer, Consumer(ns) as consumer, Admin(ns) as admin:
        one = producer.send(Message("traced", b"single", queue_id=0))
        batch = producer.send_batch([Message("traced", f"b{i}".encode(), queue_id=1) for i in range(100)])[0]
        assert read_all(consumer, "traced") >= 101
        events = trace(admin, one.msg_id, "sent", "stored", "delivered")
        assert [e.event for e in events][:3] == ["sent", "stored", "delivered"]
        stored = events[1]
        assert (stored.topic, stored.queue_id, stored.queue_offset) == ("traced", 0, one.queue_offset)
        assert stored.cost_ms is not None and stored.cost_ms >= 0 and stored.client
        assert events == sorted(events, key=lambda e: e.time_ms)
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
    ns = cluster.nameserver
    with Producer(ns) as producer, Admin(ns) as admin:
        sent = producer.send(Message("traced", b"for the cli", queue_id=1))
        trace(admin, sent.msg_id, "stored")
    command = [sys.executable, "-m", "rocketspark.cli", "admin", "-n", ns, "trace", sent.msg_id]
    table = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert table.returncode == 0, table.stderr
    assert "stored" in table.stdout and "traced" in table.stdout
    as_json = subprocess.run([*command, "--json"], capture_output=True, text=True, timeout=60)
    rows = json.loads(as_json.stdout)["tables"][0]["rows"]
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
