"""Source options against a real cluster: limits, AvailableNow, starts, ends, tags, topic selection,
trigger thresholds and caching."""

from __future__ import annotations

import json
import time
import zlib
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable

from rocketspark import Admin, LocalCluster, Message, Producer
from rocketspark.spark.options import parse_reader
from rocketspark.spark.source import RocketMQStreamReader
from tests.spark.helpers import reader, run_available_now

pytestmark = pytest.mark.spark


def make_topic(ns: str, topic: str, queues: int = 2, messages: int = 0, **kw: Any) -> None:
    with Admin(ns) as admin:
        admin.create_static_topic(topic, queues, brokers=["broker-a", "broker-b"])
    if messages:
        send(ns, topic, range(messages), queues, **kw)


def send(ns: str, topic: str, numbers: Any, queues: int, tags: Any = None) -> None:
    with Producer(ns) as producer:
        producer.send_batch(
            [Message(topic, f"m{i}".encode(), queue_id=i % queues, tags=tags(i) if tags else None) for i in numbers]
        )


def rows(spark: Any, name: str) -> list[tuple[int, int, str]]:
    return sorted(
        (r.queueId, r.queueOffset, bytes(r.body).decode()) for r in spark.sql(f"SELECT * FROM {name}").collect()
    )


def test_max_offsets_per_trigger_caps_every_batch(spark: Any, cluster: LocalCluster, tmp_path: Path) -> None:
    make_topic(cluster.nameserver, "capped", queues=3, messages=1000)
    events = reader(spark, cluster.nameserver, "capped", startingOffsets="earliest", maxOffsetsPerTrigger=170)
    query = run_available_now(events, str(tmp_path / "cp"), name="capped")
    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert sum(sizes) == 1000 and max(sizes) <= 170 and len(sizes) == 6, sizes


def test_available_now_stops_at_the_latest_offsets_seen_at_start(
    spark: Any, cluster: LocalCluster, tmp_path: Path
) -> None:
    ns = cluster.nameserver
    make_topic(ns, "available", queues=2, messages=300)
    events = reader(spark, ns, "available", startingOffsets="earliest", maxOffsetsPerTrigger=50)

    def slow(df: Any, batch_id: int) -> None:
        df.count()
        if batch_id == 0:
            send(ns, "available", range(300, 400), 2)  # arrives after the query started

    query = (
        events.writeStream.foreachBatch(slow)
        .trigger(availableNow=True)
        .option("checkpointLocation", str(tmp_path / "cp"))
        .start()
    )
    assert query.awaitTermination(180)
    assert sum(p["numInputRows"] for p in query.recentProgress) == 300


def test_starting_offsets_as_json_select_exactly_the_expected_rows(
    spark: Any, cluster: LocalCluster, tmp_path: Path
) -> None:
    make_topic(cluster.nameserver, "json-start", queues=2, messages=20)
    starting = json.dumps({"json-start": {"0": 7, "1": -1}})  # queue 0 from offset 7, queue 1 from latest
    events = reader(spark, cluster.nameserver, "json-start", startingOffsets=starting)
    run_available_now(events, str(tmp_path / "cp"), name="json_start")
    assert rows(spark, "json_start") == [(0, o, f"m{2 * o}") for o in range(7, 10)]


def test_starting_by_timestamp_selects_exactly_the_rows_stored_after_it(
    spark: Any, cluster: LocalCluster, tmp_path: Path
) -> None:
    ns = cluster.nameserver
    make_topic(ns, "by-time", queues=2, messages=10)
    time.sleep(0.05)
    cut = int(time.time() * 1000)
    time.sleep(0.05)
    send(ns, "by-time", range(10, 16), 2)
    run_available_now(reader(spark, ns, "by-time", startingTimestamp=cut), str(tmp_path / "a"), name="by_time")
    assert sorted(r[2] for r in rows(spark, "by_time")) == sorted(f"m{i}" for i in range(10, 16))
    per_queue = json.dumps({"by-time": {"0": cut, "1": 0}})
    run_available_now(
        reader(spark, ns, "by-time", startingOffsetsByTimestamp=per_queue), str(tmp_path / "b"), name="by_time_q"
    )
    got = rows(spark, "by_time_q")
    assert [r for r in got if r[0] == 0] == [(0, o, f"m{2 * o}") for o in range(5, 8)]
    assert len([r for r in got if r[0] == 1]) == 8


def test_a_batch_read_with_ending_offsets_is_bounded(spark: Any, cluster: LocalCluster) -> None:
    make_topic(cluster.nameserver, "bounded", queues=2, messages=40)
    df = (
        spark.read.format("rocketmq")
        .option("nameserver", cluster.nameserver)
        .option("topic", "bounded")
        .option("startingOffsets", json.dumps({"bounded": {"0": 2, "1": -2}}))
        .option("endingOffsets", json.dumps({"bounded": {"0": 5, "1": 4}}))
        .load()
    )
    got = sorted((r.queueId, r.queueOffset) for r in df.select("queueId", "queueOffset").collect())
    assert got == [(0, 2), (0, 3), (0, 4), (1, 0), (1, 1), (1, 2), (1, 3)]
    assert (
        spark.read.format("rocketmq").option("nameserver", cluster.nameserver).option("topic", "bounded").load().count()
        == 40
    )


def test_the_tag_filter_returns_only_matching_rows_and_no_data_loss_alarm(
    spark: Any, cluster: LocalCluster, tmp_path: Path
) -> None:
    make_topic(cluster.nameserver, "tagged", queues=2, messages=300, tags=lambda i: "keep" if i % 10 == 0 else "drop")
    events = reader(
        spark,
        cluster.nameserver,
        "tagged",
        startingOffsets="earliest",
        tags="keep",
        failOnDataLoss="true",
        maxOffsetsPerTrigger=100,
    )
    run_available_now(events, str(tmp_path / "cp"), name="tagged")
    got = rows(spark, "tagged")
    assert sorted(r[2] for r in got) == sorted(f"m{i}" for i in range(0, 300, 10))


def batch(spark: Any, ns: str, **options: Any) -> Any:
    df = spark.read.format("rocketmq").option("nameserver", ns)
    for key, value in options.items():
        df = df.option(key, str(value))
    return df.load()


def bodies(df: Any) -> list[str]:
    return sorted(bytes(r.body).decode() for r in df.select("body").collect())


def test_tags_that_share_a_hash_are_told_apart(spark: Any, cluster: LocalCluster) -> None:
    """The broker filters by CRC32 of the tag; these two tags have the same one."""
    assert zlib.crc32(b"plumless") == zlib.crc32(b"buckeroo")
    make_topic(cluster.nameserver, "collide", queues=2, messages=20, tags=lambda i: ["plumless", "buckeroo"][i % 2])
    df = batch(spark, cluster.nameserver, topic="collide", tags="plumless")
    assert bodies(df) == sorted(f"m{i}" for i in range(0, 20, 2))


def test_a_batch_read_can_end_at_ending_timestamp_alone(spark: Any, cluster: LocalCluster) -> None:
    """Spark asks for the schema before it says the read is a batch: that must not reject it."""
    ns = cluster.nameserver
    make_topic(ns, "timed", queues=2, messages=10)
    time.sleep(0.05)
    cut = int(time.time() * 1000)
    time.sleep(0.05)
    send(ns, "timed", range(10, 16), 2)
    assert bodies(batch(spark, ns, topic="timed", endingTimestamp=cut)) == sorted(f"m{i}" for i in range(10))


def test_the_timestamp_strategy_decides_a_start_after_the_newest_message(spark: Any, cluster: LocalCluster) -> None:
    ns = cluster.nameserver
    make_topic(ns, "late-start", queues=2, messages=10)
    future = int(time.time() * 1000) + 3_600_000
    with pytest.raises(Exception) as failure:  # Spark wraps the Python error in its own exception types
        batch(spark, ns, topic="late-start", startingTimestamp=future).count()
    assert 'option "startingTimestamp": no message of late-start queue' in str(failure.value)
    assert 'set startingOffsetsByTimestampStrategy to "latest"' in str(failure.value)
    late = batch(spark, ns, topic="late-start", startingTimestamp=future, startingOffsetsByTimestampStrategy="latest")
    assert late.count() == 0  # starts at the latest offsets: nothing to read, and no failure either


def test_topic_pattern_and_assign_select_topics_and_queues(spark: Any, cluster: LocalCluster) -> None:
    ns = cluster.nameserver
    make_topic(ns, "pattern-one", queues=2, messages=4)
    make_topic(ns, "pattern-two", queues=2, messages=6)
    make_topic(ns, "unpatterned", queues=2, messages=8)
    df = batch(spark, ns, topicPattern="pattern-.*")
    got = sorted((r.topic, r.queueId) for r in df.select("topic", "queueId").collect())
    assert got == sorted([("pattern-one", i % 2) for i in range(4)] + [("pattern-two", i % 2) for i in range(6)])
    df = batch(spark, ns, assign=json.dumps({"pattern-two": [1]}))
    assert sorted((r.topic, r.queueOffset) for r in df.collect()) == [("pattern-two", o) for o in range(3)]


def test_register_makes_the_format_available_where_discovery_is_off(spark: Any, cluster: LocalCluster) -> None:
    import rocketspark

    rocketspark.register(spark)  # replaces the discovered source by the same class: reads still work
    make_topic(cluster.nameserver, "registered", queues=1, messages=3)
    assert bodies(batch(spark, cluster.nameserver, topic="registered")) == ["m0", "m1", "m2"]


def test_min_offsets_per_trigger_waits_for_more_until_max_trigger_delay(cluster: LocalCluster) -> None:
    """The reader's decisions, without running a query: latestOffset keeps the start until
    enough offsets are there, or until maxTriggerDelay has passed since the last batch."""
    ns = cluster.nameserver
    make_topic(ns, "waiting", queues=2, messages=30)
    start = {"waiting": {"0": 0, "1": 0}}
    patient = stream_reader(ns, "waiting", minOffsetsPerTrigger=50, maxTriggerDelay="1h", latestOffsetCacheMs=0)
    hasty = stream_reader(ns, "waiting", minOffsetsPerTrigger=50, maxTriggerDelay="300ms", latestOffsetCacheMs=0)
    try:
        assert patient.latestOffset(start, ReadAllAvailable()) == start  # 30 < 50: wait
        time.sleep(0.4)
        assert hasty.latestOffset(start, ReadAllAvailable()) == {"waiting": {"0": 15, "1": 15}}  # waited long enough
        send(ns, "waiting", range(30, 50), 2)
        assert patient.latestOffset(start, ReadAllAvailable()) == {"waiting": {"0": 25, "1": 25}}  # 50 now
    finally:
        patient.stop()
        hasty.stop()


def test_latest_offsets_are_reused_for_latest_offset_cache_ms(cluster: LocalCluster) -> None:
    ns = cluster.nameserver
    make_topic(ns, "cached", queues=1, messages=5)
    cached = stream_reader(ns, "cached", latestOffsetCacheMs=3_600_000)
    fresh = stream_reader(ns, "cached", latestOffsetCacheMs=0)
    try:
        assert cached.reportLatestOffset() == fresh.reportLatestOffset() == {"cached": {"0": 5}}
        send(ns, "cached", range(5, 8), 1)
        assert cached.reportLatestOffset() == {"cached": {"0": 5}}
        assert fresh.reportLatestOffset() == {"cached": {"0": 8}}
    finally:
        cached.stop()
        fresh.stop()


def stream_reader(ns: str, topic: str, **options: Any) -> RocketMQStreamReader:
    values = {"nameserver": ns, "topic": topic, **{k: str(v) for k, v in options.items()}}
    return RocketMQStreamReader(parse_reader(values, streaming=True))


def test_properties_and_keys_come_through(spark: Any, cluster: LocalCluster) -> None:
    with Admin(cluster.nameserver) as admin:
        admin.create_static_topic("props", 1, brokers=["broker-a"])
    with Producer(cluster.nameserver) as producer:
        producer.send(Message("props", b"x", tags="T", keys=["k1", "k2"], properties={"trace": "abc"}))
        producer.send(Message("props", b"y"))
    df = (
        spark.read.format("rocketmq")
        .option("nameserver", cluster.nameserver)
        .option("topic", "props")
        .option("includeProperties", "true")
        .load()
        .orderBy("queueOffset")
    )
    first, second = df.collect()
    assert (first.tag, first.keys, first.properties) == ("T", ["k1", "k2"], {"trace": "abc"})
    assert (second.tag, second.keys, second.properties) == (None, None, None)
    assert first.brokerName == "broker-a" and len(first.msgId) == 32
