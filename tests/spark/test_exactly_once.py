"""Exactly once across remaps and restarts; replay of an uncommitted micro-batch; partitions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql.functions import countDistinct, spark_partition_id
from pyspark.testing import assertDataFrameEqual

from rocketspark import Admin, Consumer, LocalCluster, Message, Producer
from tests.helpers import eventually
from tests.spark.helpers import forget_last_commit, reader, run_available_now

pytestmark = [pytest.mark.spark, pytest.mark.slow]
QUEUES = 8


def produce(ns: str, topic: str, start: int, count: int) -> list[tuple[int, int, str]]:
    """Send ``count`` messages spread over the logical queues; return (queue, offset, body)."""
    rows: list[tuple[int, int, str]] = []
    with Producer(ns) as producer:
        for q in range(QUEUES):
            bodies = [f"msg-{i}" for i in range(start + q, start + count, QUEUES)]
            if not bodies:
                continue
            for result in producer.send_batch([Message(topic, b.encode(), queue_id=q) for b in bodies]):
                first = result.queue_offset
                rows += [(q, first + k, bodies.pop(0)) for k in range(result.count)]
    return rows


def test_parquet_output_equals_the_input_across_a_remap_and_a_restart(
    spark: Any, cluster: LocalCluster, tmp_path: Path
) -> None:
    ns, topic = cluster.nameserver, "exactly-once"
    with Admin(ns) as admin:
        admin.create_static_topic(topic, QUEUES, brokers=["broker-a", "broker-b"])
    sent = produce(ns, topic, 0, 2000)
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "cp")

    def start() -> Any:
        events = reader(spark, ns, topic, startingOffsets="earliest", maxOffsetsPerTrigger=700)
        return (
            events.selectExpr("queueId", "queueOffset", "CAST(body AS STRING) AS body")
            .writeStream.format("parquet")
            .option("checkpointLocation", checkpoint)
            .trigger(processingTime="200 milliseconds")
            .start(out)
        )

    def caught_up(query: Any, total: int) -> bool:
        progress = query.lastProgress
        if query.exception() is not None:
            raise query.exception()
        end = progress and progress["sources"][0]["endOffset"]
        latest = progress and progress["sources"][0]["latestOffset"]
        return bool(end) and end == latest and spark.read.parquet(out).count() == total

    query = start()
    try:
        sent += produce(ns, topic, 2000, 1500)
        with Admin(ns) as admin:
            admin.remap_static_topic(topic, [0, 1, 2], "broker-c")  # mid-stream
        sent += produce(ns, topic, 3500, 1500)
        eventually(lambda: caught_up(query, len(sent)), timeout_s=180, interval_s=0.5)
    finally:
        query.stop()
    sent += produce(ns, topic, 5000, 1000)  # arrives while the query is down
    query = start()
    try:
        eventually(lambda: caught_up(query, len(sent)), timeout_s=180, interval_s=0.5)
    finally:
        query.stop()

    expected = spark.createDataFrame(sent, "queueId int, queueOffset long, body string")
    assertDataFrameEqual(spark.read.parquet(out), expected)
    assert max(o for q, o, _ in sent if q == 0) >= 10_000  # queue 0 really crossed a remap


def test_every_micro_batch_has_one_partition_per_logical_queue(
    spark: Any, cluster: LocalCluster, tmp_path: Path
) -> None:
    ns, topic = cluster.nameserver, "partitions"
    with Admin(ns) as admin:
        admin.create_static_topic(topic, QUEUES, brokers=["broker-a", "broker-b"])
    produce(ns, topic, 0, 800)
    with Admin(ns) as admin:
        admin.remap_static_topic(topic, [3], "broker-c")
    produce(ns, topic, 800, 800)
    seen: dict[str, list[int]] = {"plain": [], "split": []}
    brokers_per_task: list[int] = []

    for label, extra in (("plain", {}), ("split", {"minPartitions": 20})):

        def record(df: Any, batch_id: int, label: str = label) -> None:
            seen[label].append(df.rdd.getNumPartitions())
            if label == "split":  # split at segment boundaries first: a task reads from one broker
                per_task = df.groupBy(spark_partition_id()).agg(countDistinct("brokerName").alias("n"))
                brokers_per_task.extend(r.n for r in per_task.collect())

        events = reader(spark, ns, topic, startingOffsets="earliest", maxOffsetsPerTrigger=400, **extra)
        query = (
            events.writeStream.foreachBatch(record)
            .trigger(availableNow=True)
            .option("checkpointLocation", str(tmp_path / label))
            .start()
        )
        assert query.awaitTermination(180), f"the {label} query did not finish in time"
        assert query.exception() is None, query.exception()
    assert seen["plain"] and all(n == QUEUES for n in seen["plain"]), seen
    assert seen["split"] and all(n >= 20 for n in seen["split"]), seen
    assert brokers_per_task and set(brokers_per_task) == {1}, brokers_per_task


def test_a_replayed_micro_batch_reads_the_same_rows_and_the_sink_stores_no_duplicates(
    spark: Any, cluster: LocalCluster, tmp_path: Path
) -> None:
    ns, source, target = cluster.nameserver, "replay-in", "replay-out"
    with Admin(ns) as admin:
        admin.create_static_topic(source, QUEUES, brokers=["broker-a", "broker-b"])
        admin.create_static_topic(target, 4, brokers=["broker-a", "broker-b"])
    produce(ns, source, 0, 1200)
    checkpoint = tmp_path / "cp"

    def copy_query() -> Any:
        events = reader(spark, ns, source, startingOffsets="earliest", maxOffsetsPerTrigger=400)
        return run_available_now(
            events.selectExpr("body", "CAST(queueOffset AS STRING) AS shardingKey"),
            str(checkpoint),
            fmt="rocketmq",
            nameserver=ns,
            topic=target,
        )

    copy_query()
    last, last_offsets = forget_last_commit(checkpoint)  # as if the driver died before committing
    assert last == 2  # three batches of 400

    copy_query()  # re-runs the last batch with exactly its logged offsets
    assert (checkpoint / "offsets" / str(last)).read_text().splitlines()[-1] == last_offsets
    assert (checkpoint / "commits" / str(last)).exists()
    with Consumer(ns) as consumer:
        stored = [m.body for q in range(4) for r in consumer.iter_range(target, q, 0) for m in r.messages]
    assert len(stored) == 1200 and len(set(stored)) == 1200, "the replayed batch appended duplicates"
    with Admin(ns) as admin:
        dropped = sum(admin.broker_counters(b).get("duplicatesDropped", 0) for b in ("broker-a", "broker-b"))
    assert dropped == 400  # the whole replayed batch was recognised and dropped
    assert json.loads(last_offsets)[source] == {str(q): 150 for q in range(QUEUES)}  # 1200 messages, all read
