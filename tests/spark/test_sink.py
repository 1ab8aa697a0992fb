"""The sink's columns, request sizes and idempotence; the source's progress commit and lag reporting."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rocketspark import Admin, Consumer, LocalCluster, Message, Producer
from rocketspark.protocol.codes import RequestCode
from rocketspark.spark import offsets_behind_latest, total_lag
from tests.spark.helpers import forget_last_commit, reader, run_available_now

pytestmark = pytest.mark.spark


def test_a_batch_write_uses_every_column(spark: Any, cluster: LocalCluster) -> None:
    ns = cluster.nameserver
    with Admin(ns) as admin:
        admin.create_static_topic("sink-a", 4, brokers=["broker-a", "broker-b"])
        admin.create_static_topic("sink-b", 2, brokers=["broker-b"])
    rows = spark.createDataFrame(
        [
            ("one", "sink-a", "T1", ["k1", "k2"], {"p": "1"}, 3, None),
            ("two", "sink-b", None, None, None, None, "user-7"),
            ("three", "sink-a", "T3", None, {}, None, None),
        ],
        "value string, topic string, tag string, keys array<string>, properties map<string,string>, "
        "queueId int, shardingKey string",
    )
    rows.write.format("rocketmq").mode("append").option("nameserver", ns).option("tag", "default").save()
    with Consumer(ns) as consumer:
        first = consumer.pull("sink-a", 3, 0).messages
        assert [(m.body, m.tags, m.keys, m.properties) for m in first] == [(b"one", "T1", ["k1", "k2"], {"p": "1"})]
        everywhere = {m.body: m for q in range(4) for r in consumer.iter_range("sink-a", q, 0) for m in r.messages}
        assert everywhere[b"three"].tags == "T3"
        b_rows = [m for q in range(2) for r in consumer.iter_range("sink-b", q, 0) for m in r.messages]
        assert [(m.body, m.tags) for m in b_rows] == [(b"two", "default")]


def test_sends_are_split_at_batch_max_bytes(spark: Any, cluster: LocalCluster) -> None:
    ns = cluster.nameserver
    with Admin(ns) as admin:
        admin.create_static_topic("sink-chunks", 1, brokers=["broker-a"])

        def sends() -> int:
            return int(admin.broker_counters("broker-a")["requests"].get(str(RequestCode.SEND_BATCH_MESSAGE), 0))

        before = sends()
        rows = spark.createDataFrame([(f"{i:05d}" * 2000,) for i in range(40)], "body string").coalesce(1)
        rows.write.format("rocketmq").mode("append").option("nameserver", ns).option("topic", "sink-chunks").option(
            "batchMaxBytes", "100000"
        ).save()
        # 10,010-byte payloads: 9 fit in 100,000 bytes, so 40 rows take 5 requests (9, 9, 9, 9, 4)
        assert sends() - before == 5
    with Consumer(ns) as consumer:
        stored = [m.body for r in consumer.iter_range("sink-chunks", 0, 0) for m in r.messages]
    assert stored == [(f"{i:05d}" * 2000).encode() for i in range(40)]


def test_a_replayed_micro_batch_is_stored_again_when_idempotence_is_off(
    spark: Any, cluster: LocalCluster, tmp_path: Path
) -> None:
    ns = cluster.nameserver
    with Admin(ns) as admin:
        admin.create_static_topic("plain-in", 1, brokers=["broker-a"])
        admin.create_static_topic("plain-out", 1, brokers=["broker-b"])
    with Producer(ns) as producer:
        producer.send_batch([Message("plain-in", f"m{i}".encode()) for i in range(20)])

    def copy() -> None:
        events = reader(spark, ns, "plain-in", startingOffsets="earliest").select("body")
        run_available_now(  # a named query: Spark hands its name to the sink as the option queryName
            events,
            str(tmp_path / "cp"),
            fmt="rocketmq",
            name="plain-copy",
            nameserver=ns,
            topic="plain-out",
            idempotent="false",
        )

    copy()
    forget_last_commit(tmp_path / "cp")
    copy()  # re-runs the batch; with idempotent=false the broker is not asked to drop anything
    with Consumer(ns) as consumer:
        stored = [m.body for r in consumer.iter_range("plain-out", 0, 0) for m in r.messages]
    assert sorted(stored) == sorted([f"m{i}".encode() for i in range(20)] * 2)


def test_progress_goes_to_a_consumer_group_and_lag_is_reported(
    spark: Any, cluster: LocalCluster, tmp_path: Path
) -> None:
    ns = cluster.nameserver
    with Admin(ns) as admin:
        admin.create_static_topic("tracked", 2, brokers=["broker-a", "broker-b"])
    with Producer(ns) as producer:
        producer.send_batch([Message("tracked", b"x", queue_id=i % 2) for i in range(600)])
    events = reader(spark, ns, "tracked", startingOffsets="earliest", maxOffsetsPerTrigger=200, consumerGroup="etl")
    query = run_available_now(events, str(tmp_path / "cp"), name="tracked")
    assert total_lag(offsets_behind_latest(query)) == 0
    middle = next(p for p in query.recentProgress if p["numInputRows"])
    assert total_lag(offsets_behind_latest(middle, ns)) == 400  # after the first of three batches
    with Admin(ns) as admin:
        progress = admin.consumer_progress("etl", "tracked")
    # commit() runs one batch late, so the group has the end of the second batch of three
    assert sum(p.consumer_offset for p in progress) == 400


def test_the_sink_writes_to_a_topic_that_does_not_exist_yet_when_brokers_auto_create(spark: Any) -> None:
    """The driver's start-up check looks the topic up; a missing one is left to the first send."""
    with LocalCluster(brokers=1) as auto:  # auto_create_topic_enable is on by default
        rows = spark.createDataFrame([("a",), ("b",)], "body string")
        rows.write.format("rocketmq").mode("append").option("nameserver", auto.nameserver).option(
            "topic", "born-by-the-sink"
        ).save()
        with Consumer(auto.nameserver) as consumer:
            queues = range(len(consumer.queues("born-by-the-sink")))
            bodies = {m.body for q in queues for r in consumer.iter_range("born-by-the-sink", q, 0) for m in r.messages}
        assert bodies == {b"a", b"b"}
