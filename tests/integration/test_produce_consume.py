"""Producing and consuming against real nameserver and broker processes."""

from __future__ import annotations

import threading
import time

import pytest

from rocketspark import Admin, Consumer, LocalCluster, Message, Producer, PullStatus
from tests.helpers import eventually

pytestmark = pytest.mark.integration


def read_queue(consumer: Consumer, topic: str, queue_id: int) -> list[bytes]:
    return [m.body for r in consumer.iter_range(topic, queue_id, 0) for m in r.messages]


def test_messages_sent_one_by_one_and_in_batches_are_all_read_back(
    shared_cluster: LocalCluster, topic_name: str
) -> None:
    ns = shared_cluster.nameserver
    with Admin(ns) as admin:
        assert admin.create_topic(topic_name, queues=2) == ["broker-a", "broker-b"]
    sent = [f"single-{i}".encode() for i in range(20)] + [f"batch-{i}".encode() for i in range(3000)]
    with Producer(ns) as producer:
        results = [producer.send(Message(topic_name, body)) for body in sent[:20]]
        results += producer.send_batch([Message(topic_name, body) for body in sent[20:]])
    assert {r.broker_name for r in results} == {"broker-a", "broker-b"}  # round robin spreads the load
    with Consumer(ns) as consumer:
        assert len(consumer.queues(topic_name)) == 4
        got = [body for q in range(4) for body in read_queue(consumer, topic_name, q)]
    assert sorted(got) == sorted(sent)


def test_a_sharding_key_keeps_a_key_on_one_queue_in_order(shared_cluster: LocalCluster, topic_name: str) -> None:
    ns = shared_cluster.nameserver
    with Admin(ns) as admin:
        admin.create_topic(topic_name, queues=4)
    with Producer(ns) as producer:
        for i in range(40):
            producer.send(Message(topic_name, f"{i % 3}:{i}".encode(), sharding_key=f"user-{i % 3}"))
    with Consumer(ns) as consumer:
        by_key: dict[str, list[int]] = {}
        queues_of: dict[str, set[int]] = {}
        for q in range(8):
            for body in read_queue(consumer, topic_name, q):
                key, seq = body.decode().split(":")
                by_key.setdefault(key, []).append(int(seq))
                queues_of.setdefault(key, set()).add(q)
    assert all(len(qs) == 1 for qs in queues_of.values())
    assert all(seqs == sorted(seqs) for seqs in by_key.values())


def test_send_result_offsets_match_what_the_consumer_reads(shared_cluster: LocalCluster, topic_name: str) -> None:
    ns = shared_cluster.nameserver
    with Admin(ns) as admin:
        admin.create_topic(topic_name, queues=1, brokers=["broker-b"])
    with Producer(ns) as producer:
        results = [producer.send(Message(topic_name, f"m{i}".encode(), tags="T", keys=["k"])) for i in range(5)]
    assert [r.queue_offset for r in results] == [0, 1, 2, 3, 4]
    with Consumer(ns) as consumer:
        pulled = consumer.pull(topic_name, 0, 0, max_messages=10)
    assert pulled.status is PullStatus.FOUND
    assert [(m.queue_offset, m.msg_id) for m in pulled.messages] == [(r.queue_offset, r.msg_id) for r in results]
    assert pulled.messages[0].tags == "T" and pulled.messages[0].keys == ["k"]
    assert pulled.messages[0].broker_name == "broker-b"
    assert (pulled.next_offset, pulled.min_offset, pulled.max_offset) == (5, 0, 5)


def test_async_and_oneway_sends_arrive(shared_cluster: LocalCluster, topic_name: str) -> None:
    ns = shared_cluster.nameserver
    with Admin(ns) as admin:
        admin.create_topic(topic_name, queues=1, brokers=["broker-a"])
    with Producer(ns) as producer:
        futures = [producer.send_async(Message(topic_name, f"async-{i}".encode())) for i in range(10)]
        results = [f.result(10) for f in futures]
        assert sorted(r.queue_offset for r in results) == list(range(10))  # each stored once, one queue
        producer.send_oneway(Message(topic_name, b"oneway"))
    with Consumer(ns) as consumer:
        eventually(lambda: consumer.max_offset(topic_name, 0) == 11)
        stored = {m.queue_offset: m.body for m in consumer.pull(topic_name, 0, 0, max_messages=20).messages}
    assert [stored[r.queue_offset] for r in results] == [f"async-{i}".encode() for i in range(10)]  # each its own
    assert stored[10] == b"oneway"


def test_the_tag_filter_returns_only_matching_messages(shared_cluster: LocalCluster, topic_name: str) -> None:
    ns = shared_cluster.nameserver
    with Admin(ns) as admin:
        admin.create_topic(topic_name, queues=1, brokers=["broker-a"])
    with Producer(ns) as producer:
        producer.send_batch([Message(topic_name, f"{i}".encode(), tags="A" if i % 3 == 0 else "B") for i in range(30)])
    with Consumer(ns) as consumer:
        pulled = consumer.pull(topic_name, 0, 0, max_messages=100, tags="A || C")
    assert [m.body for m in pulled.messages] == [f"{i}".encode() for i in range(0, 30, 3)]
    assert pulled.next_offset == 30


def test_a_long_poll_returns_as_soon_as_a_message_arrives(shared_cluster: LocalCluster, topic_name: str) -> None:
    ns = shared_cluster.nameserver
    with Admin(ns) as admin:
        admin.create_topic(topic_name, queues=1, brokers=["broker-a"])
    with Producer(ns) as producer, Consumer(ns) as consumer:
        started = time.monotonic()
        timer = threading.Timer(0.3, lambda: producer.send(Message(topic_name, b"late")))
        timer.start()
        pulled = consumer.pull(topic_name, 0, 0, long_poll_ms=10_000)
        elapsed = time.monotonic() - started
        timer.join()
    assert pulled.status is PullStatus.FOUND and [m.body for m in pulled.messages] == [b"late"]
    assert 0.25 < elapsed < 3


def test_a_long_poll_with_nothing_to_read_ends_at_its_deadline(shared_cluster: LocalCluster, topic_name: str) -> None:
    ns = shared_cluster.nameserver
    with Admin(ns) as admin:
        admin.create_topic(topic_name, queues=1, brokers=["broker-a"])
    with Consumer(ns) as consumer:
        started = time.monotonic()
        pulled = consumer.pull(topic_name, 0, 0, long_poll_ms=400)
    assert pulled.status is PullStatus.NO_NEW_MSG and 0.35 < time.monotonic() - started < 3


def test_offset_by_timestamp_and_min_max(shared_cluster: LocalCluster, topic_name: str) -> None:
    ns = shared_cluster.nameserver
    with Admin(ns) as admin:
        admin.create_topic(topic_name, queues=1, brokers=["broker-a"])
    with Producer(ns) as producer, Consumer(ns) as consumer:
        producer.send_batch([Message(topic_name, b"old")] * 5)
        time.sleep(0.05)
        middle = int(time.time() * 1000)
        time.sleep(0.05)
        producer.send_batch([Message(topic_name, b"new")] * 3)
        assert consumer.offset_for_timestamp(topic_name, 0, middle) == 5
        assert (consumer.min_offset(topic_name, 0), consumer.max_offset(topic_name, 0)) == (0, 8)


def test_consumer_offsets_are_kept_by_the_broker_across_a_restart(make_cluster: object, topic_name: str) -> None:
    cluster = make_cluster(brokers=1, broker_config={"offset_flush_interval_ms": 100})  # type: ignore[operator]
    ns = cluster.nameserver
    with Admin(ns) as admin:
        admin.create_topic(topic_name, queues=2)
    with Consumer(ns) as consumer:
        assert consumer.committed_offset("g1", topic_name, 1) is None
        consumer.commit_offset("g1", topic_name, 1, 42)
        assert consumer.committed_offset("g1", topic_name, 1) == 42
    cluster.stop_broker("broker-a")
    cluster.start_broker("broker-a")
    with Consumer(ns) as consumer:
        assert eventually(lambda: consumer.committed_offset("g1", topic_name, 1) == 42)
    with Admin(ns) as admin:
        progress = admin.consumer_progress("g1", topic_name)
    assert [(p.queue_id, p.consumer_offset) for p in progress] == [(0, -1), (1, 42)]


def test_topic_status_and_counters_report_what_happened(shared_cluster: LocalCluster, topic_name: str) -> None:
    ns = shared_cluster.nameserver
    with Admin(ns) as admin:
        admin.create_topic(topic_name, queues=2, brokers=["broker-a"])
        with Producer(ns) as producer:
            producer.send_batch([Message(topic_name, b"x", queue_id=1)] * 7)
        status = admin.topic_status(topic_name)
        assert [(s.queue_id, s.min_offset, s.max_offset) for s in status] == [(0, 0, 0), (1, 0, 7)]
        assert status[1].last_store_ms > 0
        counters = admin.broker_counters("broker-a")
        assert counters["messagesStored"] >= 7 and int(counters["requests"]["320"]) >= 1
        assert int(admin.nameserver_counters()["requests"]["105"]) >= 1


def test_a_deleted_topic_disappears_from_routes_and_brokers(shared_cluster: LocalCluster, topic_name: str) -> None:
    ns = shared_cluster.nameserver
    with Admin(ns) as admin:
        admin.create_topic(topic_name, queues=1)
        assert sorted(admin.delete_topic(topic_name)) == ["broker-a", "broker-b"]
        with pytest.raises(Exception, match="does not exist"):
            admin.topic_route(topic_name)
