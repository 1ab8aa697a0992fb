"""A streaming query keeps going, exactly once, while a replica group's master is SIGKILLed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pyspark.testing import assertDataFrameEqual

from rocketspark import Admin, LocalCluster, Message, Producer
from tests.helpers import eventually
from tests.spark.helpers import reader

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.integration]
QUEUES = 4
BROKER = {
    "in_sync_replicas": 2,
    "auto_create_topic_enable": False,
    "controller_heartbeat_interval_ms": 200,
    "master_lease_ms": 1000,
    "ha_max_time_slave_not_catchup_ms": 2000,
}


def replica_group(replicas: int) -> LocalCluster:
    """One replica group (processes) with every replica in the SyncStateSet."""
    cluster = LocalCluster(
        brokers=1,
        replicas=replicas,
        processes=True,
        broker_config=BROKER,
        nameserver_config={"controller_broker_heartbeat_timeout_ms": 1500},
    ).start()
    try:
        with Admin(cluster.nameserver) as admin:
            eventually(lambda: len(admin.replica_groups()["broker-a"].sync_state_set) == replicas, 30)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def produce(ns: str, topic: str, start: int, count: int) -> list[tuple[int, int, str]]:
    rows: list[tuple[int, int, str]] = []
    with Producer(ns, send_timeout_ms=10_000) as producer:
        for i in range(start, start + count):
            body = f"msg-{i}"
            result = producer.send(Message(topic, body.encode(), queue_id=i % QUEUES))
            rows.append((i % QUEUES, result.queue_offset, body))
    return rows


def test_a_streaming_query_is_exactly_once_across_a_master_failover(spark: Any, tmp_path: Path) -> None:
    cluster = replica_group(3)
    try:
        ns, topic = cluster.nameserver, "failover-stream"
        with Admin(ns) as admin:
            admin.create_static_topic(topic, QUEUES, brokers=["broker-a"])
        sent = produce(ns, topic, 0, 600)
        out, checkpoint = str(tmp_path / "out"), str(tmp_path / "cp")
        events = reader(spark, ns, topic, startingOffsets="earliest", maxOffsetsPerTrigger=200)
        query = (
            events.selectExpr("queueId", "queueOffset", "CAST(body AS STRING) AS body")
            .writeStream.format("parquet")
            .option("checkpointLocation", checkpoint)
            .trigger(processingTime="200 milliseconds")
            .start(out)
        )
        try:
            eventually(lambda: query.lastProgress is not None and query.lastProgress["numInputRows"] > 0, 120)
            with Admin(ns) as admin:
                master = admin.replica_groups()["broker-a"].master
            assert master is not None
            cluster.kill(master)
            sent += produce(ns, topic, 600, 600)  # the producer finds the new master by itself

            def caught_up() -> bool:
                if query.exception() is not None:
                    raise query.exception()
                progress = query.lastProgress
                source = progress and progress["sources"][0]
                done = bool(source) and source["endOffset"] == source["latestOffset"]
                return done and spark.read.parquet(out).count() == len(sent)

            eventually(caught_up, timeout_s=180, interval_s=0.5)
        finally:
            query.stop()
        expected = spark.createDataFrame(sent, "queueId int, queueOffset long, body string")
        assertDataFrameEqual(spark.read.parquet(out), expected)
    finally:
        cluster.stop()


def test_a_batch_read_of_a_group_without_a_master_reads_every_acknowledged_message_from_a_slave(spark: Any) -> None:
    cluster = replica_group(2)
    try:
        ns, topic = cluster.nameserver, "stranded-batch"
        with Admin(ns) as admin:
            admin.create_topic(topic, queues=QUEUES)
            sent = produce(ns, topic, 0, 400)
            master = admin.replica_groups()["broker-a"].master
            assert master is not None
            slave = next(a for a in cluster.replicas_of("broker-a") if a != master)
            cluster.pause(slave)  # out of the SyncStateSet: it may never become master
            eventually(lambda: admin.replica_groups()["broker-a"].sync_state_set == [master], 30)
            cluster.kill(master)
            cluster.resume(slave)
            eventually(lambda: admin.replica_groups()["broker-a"].master is None, 30)
        df = (
            spark.read.format("rocketmq")
            .option("nameserver", ns)
            .option("topic", topic)
            .option("startingOffsets", "earliest")
            .option("endingOffsets", "latest")
            .load()
            .selectExpr("queueId", "queueOffset", "CAST(body AS STRING) AS body")
        )
        expected = spark.createDataFrame(sent, "queueId int, queueOffset long, body string")
        assertDataFrameEqual(df, expected)
    finally:
        cluster.stop()
