"""The broker and client side of the console's message pages (issue 30), on real processes: a
topic's messages by store time, newest first and paged across brokers and a static topic's
segments; a message resent to one group (consumed again by it alone), a dead letter too; the
retry and dead-letter topics; a topic's config as each broker holds it; per-topic messages in
and out in the broker counters; and print-msg and resend-msg on the command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from rocketspark import Admin, Consumer, GroupConsumer, LocalCluster, Message, MessageExt, Producer
from rocketspark.client.admin import GroupTopic, MessagePage
from rocketspark.errors import InvalidParameterError, MessageNotFoundError, TopicNotExistError
from rocketspark.protocol.types import TopicConfig
from tests.helpers import eventually

pytestmark = pytest.mark.integration
CLI = [sys.executable, "-m", "rocketspark.cli"]


def every_page(admin: Admin, topic: str, limit: int, **times: int | None) -> list[MessagePage]:
    pages = [admin.browse_messages(topic, limit=limit, **times)]
    while pages[-1].cursor is not None:
        pages.append(admin.browse_messages(topic, limit=limit, cursor=pages[-1].cursor, **times))
        assert len(pages) < 100
    return pages


def indexed(admin: Admin, msg_id: str) -> None:
    """Wait until the brokers' key index knows the id (a second or so after the send)."""

    def found() -> bool:
        try:
            return bool(admin.query_message_by_id(msg_id))
        except MessageNotFoundError:
            return False

    eventually(found, timeout_s=30)


def places(messages: list[MessageExt]) -> list[tuple[int, int]]:
    return [(m.queue_id, m.queue_offset) for m in messages]


def newest_first(messages: list[MessageExt]) -> list[MessageExt]:
    """By store time, born time, and on one broker its log's order (a tie between brokers has
    no true order: the later broker name first, as the pages put it)."""
    key = lambda m: (m.store_timestamp, m.born_timestamp, m.broker_name, m.commitlog_offset, m.batch_index)  # noqa: E731
    return sorted(messages, key=key, reverse=True)


def stored(consumer: Consumer, topic: str) -> list[MessageExt]:
    """Every message of the topic, read forwards (what the pages must add up to)."""
    out: list[MessageExt] = []
    for queue in consumer.queues(topic):
        start, end = consumer.min_offset(topic, queue.queue_id), consumer.max_offset(topic, queue.queue_id)
        for result in consumer.iter_range(topic, queue.queue_id, start, end):
            out += result.messages
    return out


def test_pages_of_a_topic_on_two_brokers_come_newest_first_and_add_up_to_the_time_range(
    shared_cluster: LocalCluster, topic_name: str
) -> None:
    ns = shared_cluster.nameserver
    with Admin(ns) as admin, Producer(ns) as producer, Consumer(ns) as consumer:
        admin.create_topic(topic_name, 3)  # 6 queues, 3 on each broker
        for round_ in range(3):
            for i in range(20):
                producer.send(Message(topic_name, f"r{round_}-{i}".encode(), keys=f"k{round_}-{i}"))
            time.sleep(0.01)  # the rounds' store times apart
        everything = stored(consumer, topic_name)
        assert len(everything) == 60 and {m.broker_name for m in everything} == {"broker-a", "broker-b"}

        pages = every_page(admin, topic_name, 7)
        assert [len(p.messages) for p in pages] == [7] * 8 + [4]
        shown = [m for p in pages for m in p.messages]
        assert places(shown) == places(newest_first(everything))  # each message once, newest first
        assert {m.body for m in shown[:20]} == {f"r2-{i}".encode() for i in range(20)}  # the last round first

        middle = [m for m in everything if m.body.startswith(b"r1-")]
        start_ms = min(m.store_timestamp for m in middle)
        end_ms = max(m.store_timestamp for m in middle) + 1
        in_range = [m for m in everything if start_ms <= m.store_timestamp < end_ms]
        ranged = every_page(admin, topic_name, 6, start_ms=start_ms, end_ms=end_ms)
        assert places([m for p in ranged for m in p.messages]) == places(newest_first(in_range))
        assert admin.browse_messages(topic_name, start_ms=end_ms + 60_000).messages == []
        [page] = every_page(admin, topic_name, 200)
        assert len(page.messages) == 60 and page.cursor is None


def test_a_static_topic_is_paged_across_its_segments_after_a_remap(
    shared_cluster: LocalCluster, topic_name: str
) -> None:
    ns = shared_cluster.nameserver
    with Admin(ns) as admin, Producer(ns) as producer:
        admin.create_static_topic(topic_name, 2, brokers=["broker-a"])
        producer.send_batch([Message(topic_name, f"before-{i}".encode(), queue_id=0) for i in range(30)])
        producer.send(Message(topic_name, b"other", queue_id=1))
        admin.remap_static_topic(topic_name, [0], "broker-b")
        for i in range(10):
            producer.send(Message(topic_name, f"after-{i}".encode(), queue_id=0))

        shown = [m for p in every_page(admin, topic_name, 8) for m in p.messages]
    assert [m.body for m in shown[:10]] == [f"after-{i}".encode() for i in reversed(range(10))]
    assert {m.broker_name for m in shown[:10]} == {"broker-b"}
    queue0 = [m for m in shown if m.queue_id == 0]
    assert len(queue0) == 40 and [m.queue_offset for m in queue0] == sorted(
        (m.queue_offset for m in queue0), reverse=True
    )
    assert {m.broker_name for m in queue0[10:]} == {"broker-a"}  # the old segment, read where it stays
    assert sorted(m.body for m in shown if m.queue_id == 1) == [b"other"]


def test_a_bad_limit_cursor_or_time_range_is_refused_saying_what_to_do(
    shared_cluster: LocalCluster, topic_name: str
) -> None:
    ns = shared_cluster.nameserver
    with Admin(ns) as admin, Producer(ns) as producer:
        admin.create_topic(topic_name, 2, brokers=["broker-a"])  # one broker: its log orders a tie in time
        for i in range(5):
            producer.send(Message(topic_name, f"m{i}".encode()))
        first = admin.browse_messages(topic_name, limit=2, start_ms=1)
        assert first.cursor is not None
        for limit in (0, 201):
            with pytest.raises(InvalidParameterError, match="limit must be between 1 and 200"):
                admin.browse_messages(topic_name, limit=limit)
        for bad in ("garbage", "", first.cursor[:-4], "eyJ2Ijo5fQ"):
            with pytest.raises(InvalidParameterError, match="start again without a cursor"):
                admin.browse_messages(topic_name, cursor=bad)
        admin.create_topic(topic_name + "-x", 1)
        with pytest.raises(InvalidParameterError, match=f'made for topic "{topic_name}"'):
            admin.browse_messages(topic_name + "-x", cursor=first.cursor)
        with pytest.raises(InvalidParameterError, match="made for start 1, not 2"):
            admin.browse_messages(topic_name, start_ms=2, cursor=first.cursor)
        with pytest.raises(InvalidParameterError, match="the time range is empty"):
            admin.browse_messages(topic_name, start_ms=10, end_ms=10)
        with pytest.raises(TopicNotExistError):
            admin.browse_messages(topic_name + "-nothing")
        second = admin.browse_messages(topic_name, limit=2, cursor=first.cursor)  # the range as the cursor says
        assert [m.body for m in first.messages + second.messages] == [b"m4", b"m3", b"m2", b"m1"]


def test_browsing_a_traced_topic_is_no_delivery_in_its_trace(shared_cluster: LocalCluster, topic_name: str) -> None:
    ns = shared_cluster.nameserver
    with Admin(ns) as admin, Producer(ns) as producer, Consumer(ns) as consumer:
        admin.create_topic(topic_name, 1, brokers=["broker-a"], trace=True)
        sent = producer.send(Message(topic_name, b"traced"))
        [shown] = admin.browse_messages(topic_name).messages
        assert consumer.pull(topic_name, 0, 0).count == 1  # a delivery, recorded after the browse's read

        def events() -> list[str]:
            found = [e.event for e in admin.message_trace(shown.offset_msg_id)]
            assert "delivered" in found
            return found

        assert eventually(events, timeout_s=30) == ["sent", "stored", "delivered"]  # the pull's alone
        assert shown.msg_id == sent.msg_id


class Collected:
    """What a group consumer's handler was given, and (``failing``) what it failed on."""

    def __init__(self, failing: bytes | None = None) -> None:
        self.messages: list[MessageExt] = []
        self.failing = failing
        self.lock = threading.Lock()

    def __call__(self, messages: list[MessageExt]) -> None:
        with self.lock:
            if any(m.body == self.failing for m in messages):
                raise ValueError("cannot handle it")
            self.messages += messages

    def bodies(self) -> list[bytes]:
        with self.lock:
            return [m.body for m in self.messages]


@pytest.fixture
def consuming(shared_cluster: LocalCluster, topic_name: str) -> Iterator[tuple[str, Collected, Collected, Collected]]:
    """Three groups on one topic: billing, audit, and fraud, which fails on b"poison" (its
    failures go to its DLQ at once); each has handled the first message before the test."""
    ns = shared_cluster.nameserver
    with Admin(ns) as admin:
        admin.create_topic(topic_name, 2)
    collected = (Collected(), Collected(), Collected(b"poison"))
    names = (f"{topic_name}-billing", f"{topic_name}-audit", f"{topic_name}-fraud")
    consumers = [
        GroupConsumer(
            ns,
            name,
            topic_name,
            handler,
            start_from="earliest",
            heartbeat_interval_ms=200,
            rebalance_interval_ms=500,
            max_reconsume_times=0,
        )
        for name, handler in zip(names, collected, strict=True)
    ]
    for consumer in consumers:
        consumer.start()
    try:
        yield topic_name, *collected
    finally:
        for consumer in consumers:
            consumer.stop()


def test_a_resent_message_is_consumed_again_by_that_group_alone(
    shared_cluster: LocalCluster, consuming: tuple[str, Collected, Collected, Collected]
) -> None:
    topic, billing, audit, _ = consuming
    ns = shared_cluster.nameserver
    with Admin(ns) as admin, Producer(ns) as producer:
        original = Message(topic, b"order 1", tags="created", keys=["o-1"], properties={"region": "eu"})
        sent = producer.send(original)
        eventually(lambda: billing.bodies() == [b"order 1"] and audit.bodies() == [b"order 1"], timeout_s=30)

        indexed(admin, sent.msg_id)
        result = admin.resend_message(sent.msg_id, f"{topic}-billing")
        assert result.msg_id != sent.msg_id
        eventually(lambda: billing.bodies() == [b"order 1", b"order 1"], timeout_s=30)
        producer.send(Message(topic, b"marker"))
        eventually(lambda: b"marker" in audit.bodies() and b"marker" in billing.bodies(), timeout_s=30)
        assert audit.bodies().count(b"order 1") == 1  # the other group did not get the copy
        again = billing.messages[1]
        assert (again.topic, again.tags, again.keys, again.body) == (topic, "created", ["o-1"], b"order 1")
        assert again.properties["region"] == "eu" and again.properties["RECONSUME_TIME"] == "0"
        assert again.properties["ORIGIN_MESSAGE_ID"] == sent.msg_id and again.msg_id == result.msg_id

        with pytest.raises(InvalidParameterError, match='consumer group "nobody" is unknown'):
            admin.resend_message(sent.msg_id, "nobody")
        with pytest.raises(InvalidParameterError, match="a consumer group is required"):
            admin.resend_message(sent.msg_id, " ")
        with Consumer(ns) as consumer:  # a group known by its progress alone, as a Spark job's
            consumer.commit_offset(f"{topic}-offsets", topic, 0, 1)
        with pytest.raises(InvalidParameterError, match=f"has no retry topic %RETRY%{topic}-offsets"):
            admin.resend_message(sent.msg_id, f"{topic}-offsets")


def test_a_dead_letter_found_in_the_dlq_is_resent_to_its_group_under_its_first_topic(
    shared_cluster: LocalCluster, consuming: tuple[str, Collected, Collected, Collected]
) -> None:
    topic, _, _, fraud = consuming
    group = f"{topic}-fraud"
    ns = shared_cluster.nameserver
    with Admin(ns) as admin, Producer(ns) as producer:
        sent = producer.send(Message(topic, b"poison", keys="p-1"))
        dlq = f"%DLQ%{group}"
        [letter] = eventually(lambda: admin.browse_messages(dlq).messages, timeout_s=30)
        assert letter.properties["RETRY_TOPIC"] == topic and letter.keys == ["p-1"]
        listed = {t.topic: t for t in admin.group_topics()}
        assert listed[dlq] == GroupTopic(dlq, group, "dlq", 1)
        assert listed[f"%RETRY%{group}"].kind == "retry" and listed[f"%RETRY%{group}"].group == group
        assert [t.topic for t in admin.group_topics()] == sorted(listed)

        fraud.failing = None  # fixed: the group can take it now
        admin.resend_message(letter.offset_msg_id, group)
        [again] = eventually(lambda: [m for m in fraud.messages if m.body == b"poison"], timeout_s=30)
    assert again.topic == topic and again.properties["ORIGIN_MESSAGE_ID"] == sent.msg_id


def test_a_topics_config_is_shown_as_each_broker_holds_it(shared_cluster: LocalCluster, topic_name: str) -> None:
    with Admin(shared_cluster.nameserver) as admin:
        admin.create_topic(topic_name, 3, brokers=["broker-b"], trace=True)
        admin.create_topic(topic_name, 2, brokers=["broker-a"], read_queues=4)
        assert admin.topic_config(topic_name) == {
            "broker-a": TopicConfig(topic_name, read_queue_nums=4, write_queue_nums=2),
            "broker-b": TopicConfig(topic_name, read_queue_nums=3, write_queue_nums=3, trace=True),
        }
        with pytest.raises(TopicNotExistError, match="exists on no registered broker"):
            admin.topic_config(topic_name + "-nothing")


def test_the_broker_counters_count_each_topics_messages_in_and_out(
    shared_cluster: LocalCluster, topic_name: str
) -> None:
    ns = shared_cluster.nameserver
    with Admin(ns) as admin, Producer(ns) as producer, Consumer(ns) as consumer:
        admin.create_topic(topic_name, 1, brokers=["broker-a"])
        producer.send_batch([Message(topic_name, b"x")] * 5)
        assert admin.broker_counters("broker-a")["topics"][topic_name] == {"messagesIn": 5, "messagesOut": 0}
        assert consumer.pull(topic_name, 0, 0, 32).count == 5
        assert admin.broker_counters("broker-a")["topics"][topic_name] == {"messagesIn": 5, "messagesOut": 5}
        assert topic_name not in admin.broker_counters("broker-b")["topics"]


def run_cli(nameserver: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, "admin", "-n", nameserver, *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "200"},
    )


def test_print_msg_pages_with_its_cursor_and_resend_msg_names_the_copy(
    shared_cluster: LocalCluster, topic_name: str
) -> None:
    ns = shared_cluster.nameserver
    with Admin(ns) as admin, Producer(ns) as producer:
        admin.create_topic(topic_name, 1)  # queue 1 of the topic is broker-b's queue 0
        sent = [producer.send(Message(topic_name, f"m{i}".encode(), queue_id=1)) for i in range(3)]
        group = GroupConsumer(ns, f"{topic_name}-g", topic_name, lambda messages: None, heartbeat_interval_ms=200)
        group.start()
        try:
            eventually(lambda: f"%RETRY%{topic_name}-g" in {t.topic for t in admin.group_topics()}, timeout_s=30)
            indexed(admin, sent[0].msg_id)
            resent = run_cli(ns, "resend-msg", sent[0].msg_id, "--group", f"{topic_name}-g")
        finally:
            group.stop()
    assert resent.returncode == 0, resent.stderr
    assert f"%RETRY%{topic_name}-g" in resent.stdout
    done = run_cli(ns, "--json", "print-msg", topic_name, "--limit", "2", "--begin", "2000-01-01T00:00:00")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    [table] = document["tables"]
    assert [(r["body"], r["queue #"], r["broker"]) for r in table["rows"]] == [(m, 1, "broker-b") for m in ("m2", "m1")]
    assert document["cursor"] and any(document["cursor"] in line for line in document["messages"])
    rest = run_cli(ns, "--json", "print-msg", topic_name, "--cursor", document["cursor"])
    last = json.loads(rest.stdout)
    assert [r["body"] for r in last["tables"][0]["rows"]] == ["m0"] and last["cursor"] is None

    bad = run_cli(ns, "print-msg", topic_name, "--limit", "500")
    assert bad.returncode != 0 and "limit must be between 1 and 200" in bad.stderr
    unknown = run_cli(ns, "resend-msg", sent[0].msg_id, "--group", "nobody-at-all")
    assert unknown.returncode != 0 and 'consumer group "nobody-at-all" is unknown' in unknown.stderr
