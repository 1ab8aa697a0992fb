"""Batch filter pushdown: a filtered read's rows equal the filter applied to an unfiltered read,
and the brokers serve only what the pushed filters keep (their per-topic ``messagesOut``).

A broker serves whole batch records (the unit of storage and fetch): a read from offset X
counts the messages from X to the end of X's batch. The topics here are stored in batches of
25 messages of one tag each, so the figures are exact.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from pyspark.testing import assertDataFrameEqual

from rocketspark import Admin, LocalCluster, Message, Producer
from tests.docblocks import blocks_run_by

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SETTING = "spark.sql.python.filterPushdown.enabled"
QUEUES, BATCH = 8, 25
GAP_S = 2.5  # between the two halves of a topic: more than twice the store-time search's slack


@contextmanager
def pushdown(spark: Any, on: bool) -> Iterator[None]:
    """The session's pushdown setting for a while (``rocketspark.register`` may have set it)."""
    before = spark.conf.getAll.get(SETTING)
    spark.conf.set(SETTING, str(on).lower())
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset(SETTING)
        else:
            spark.conf.set(SETTING, before)


def produce(ns: str, topic: str, queues: int, batches: int, first_batch: int) -> None:
    """``batches`` batches of ``BATCH`` messages to every queue; batch k (counted per queue from
    ``first_batch``) has tag A if k is even, else B."""
    with Producer(ns) as producer:
        for k in range(first_batch, first_batch + batches):
            for q in range(queues):
                tag = "A" if k % 2 == 0 else "B"
                bodies = [f"q{q}-b{k}-{i}".encode() for i in range(BATCH)]
                producer.send_batch([Message(topic, b, queue_id=q, tags=tag) for b in bodies])


def two_halves(ns: str, topic: str, queues: int, batches: int, between: Any = None) -> str:
    """Fill ``topic`` in two halves ``GAP_S`` apart (``between`` runs in the gap); return a
    timestamp literal in the gap (the session's time zone is UTC)."""
    produce(ns, topic, queues, batches, 0)
    if between is not None:
        between()
    time.sleep(GAP_S / 2)
    mid = datetime.datetime.now(datetime.UTC)
    time.sleep(GAP_S / 2)
    produce(ns, topic, queues, batches, batches)
    return f"TIMESTAMP '{mid.strftime('%Y-%m-%d %H:%M:%S.%f')}'"


def served(ns: str, topic: str) -> int:
    """Messages of ``topic`` the brokers have served, all brokers together."""
    with Admin(ns) as admin:
        names = sorted(admin.cluster_list()["brokers"])
        return sum(admin.broker_counters(b)["topics"].get(topic, {}).get("messagesOut", 0) for b in names)


def read(spark: Any, ns: str, topic: str, where: str) -> tuple[list[Any], int]:
    """The rows of a filtered batch read, and the messages the brokers served for it."""
    before = served(ns, topic)
    rows = spark.read.format("rocketmq").option("nameserver", ns).option("topic", topic).load().where(where).collect()
    return rows, served(ns, topic) - before


@pytest.fixture(scope="module")
def plain(cluster: LocalCluster) -> tuple[str, str]:
    """An 8-queue topic of 2,000 messages on one broker (250 a queue, half of them tag A), its
    second half stored ``GAP_S`` after the first; and a timestamp literal in the gap."""
    ns, topic = cluster.nameserver, "pushdown-plain"
    with Admin(ns) as admin:
        admin.create_topic(topic, QUEUES, brokers=["broker-a"])
    return topic, two_halves(ns, topic, QUEUES, 5)


CASES = [  # where, messages the brokers serve with pushdown (2,000 without)
    ("queueId = 1", 250),
    ("queueId IN (1, 3)", 500),
    ("queueId >= 6", 500),
    ("queueOffset >= 200", 400),
    ("queueOffset BETWEEN 10 AND 19 AND queueId < 2", 2 * 15),  # offsets 10..24 of the first batch
    ("queueOffset = 7", QUEUES * 18),
    ("tag = 'A'", 1000),
    ("tag IN ('A', 'B')", 2000),
    ("tag = 'A' AND queueId = 0", 125),
    ("tag = 'C'", 0),
    ("storeTimestamp >= {mid}", 1000),  # narrowed by store time, and applied by Spark
    ("storeTimestamp < {mid} AND queueId = 5", 125),
    ("bornTimestamp >= {mid}", 2000),  # not indexed: handed back whole
    ("queueId = 1 OR tag = 'A'", 2000),  # Spark pushes no OR: filtered by Spark
    ("queueId = 1 AND queueOffset >= 300", 0),  # past the end: nothing to read
    ("queueId = 1 AND length(body) > 0", 250),  # what cannot be pushed is handed back
]


@pytest.mark.parametrize(("where", "wanted"), CASES, ids=[c[0] for c in CASES])
def test_a_pushed_filter_reads_what_spark_would_keep_and_serves_only_that(
    spark: Any, cluster: LocalCluster, plain: tuple[str, str], where: str, wanted: int
) -> None:
    topic, mid = plain
    where = where.format(mid=mid)
    with pushdown(spark, False):
        expected, all_served = read(spark, cluster.nameserver, topic, where)
    with pushdown(spark, True):
        rows, pushed_served = read(spark, cluster.nameserver, topic, where)
    assert all_served == 2000
    assertDataFrameEqual(rows, expected)
    assert pushed_served == wanted


def test_a_session_with_default_settings_reads_filtered_rows_unpushed(
    spark: Any, cluster: LocalCluster, plain: tuple[str, str]
) -> None:
    topic, _ = plain
    before = spark.conf.getAll.get(SETTING)
    spark.conf.unset(SETTING)  # Spark's default: false
    try:
        rows, count = read(spark, cluster.nameserver, topic, "queueId = 1")
    finally:
        if before is not None:
            spark.conf.set(SETTING, before)
    assert len(rows) == 250 and {r.queueId for r in rows} == {1}
    assert count == 2000


def test_the_plan_names_the_filters_spark_still_applies(
    spark: Any, cluster: LocalCluster, plain: tuple[str, str]
) -> None:
    topic, mid = plain
    df = spark.read.format("rocketmq").option("nameserver", cluster.nameserver).option("topic", topic).load()

    def plan(where: str) -> str:
        return str(df.where(where)._jdf.queryExecution().executedPlan().toString())

    with pushdown(spark, True):
        exact = plan("queueId = 1 AND tag = 'A' AND queueOffset < 100")
        narrowed = plan(f"storeTimestamp >= {mid}")
    assert "Filter" not in exact.split("BatchScan")[0]  # exact: nothing left for Spark
    assert "Filter" in narrowed.split("BatchScan")[0] and "storeTimestamp" in narrowed


def test_filters_on_a_static_topic_after_a_remap(spark: Any, cluster: LocalCluster) -> None:
    """Four logical queues on broker-a, two of them remapped to broker-c halfway: each filter's
    rows equal Spark's, and the segments on both brokers serve only what it keeps."""
    ns, topic = cluster.nameserver, "pushdown-static"
    with Admin(ns) as admin:
        admin.create_static_topic(topic, 4, brokers=["broker-a"])

    def remap() -> None:
        with Admin(ns) as admin:
            admin.remap_static_topic(topic, [0, 1], "broker-c")

    mid = two_halves(ns, topic, 4, 2, between=remap)
    with pushdown(spark, False):
        everything, _ = read(spark, ns, topic, "true")
    later = min(r.queueOffset for r in everything if r.queueId == 0 and r.brokerName == "broker-c")
    cases = [  # each keeps whole batches: the brokers serve exactly the rows kept
        ("queueId = 0", 100),
        (f"queueOffset >= {later}", None),  # from where the remap took queue 0 on
        ("tag = 'A' AND queueId IN (0, 3)", 100),
        (f"storeTimestamp >= {mid}", 200),
        (f"storeTimestamp >= {mid} AND queueId = 1", 50),
    ]
    for where, wanted in cases:
        with pushdown(spark, False):
            expected, _ = read(spark, ns, topic, where)
        with pushdown(spark, True):
            rows, count = read(spark, ns, topic, where)
        assertDataFrameEqual(rows, expected)
        assert count == len(expected) == (wanted or len(expected)), where
    assert later > 0


def test_the_docs_example_runs_as_written(
    spark: Any, cluster: LocalCluster, plain: tuple[str, str], capsys: Any
) -> None:
    [block] = blocks_run_by("tests/spark/test_pushdown.py::test_the_docs_example_runs_as_written")
    before = spark.conf.getAll.get(SETTING)
    start = served(cluster.nameserver, plain[0])
    try:
        exec(block.text, {"spark": spark, "nameserver": cluster.nameserver, "topic": plain[0]})
    finally:
        spark.conf.unset(SETTING)
        if before is not None:
            spark.conf.set(SETTING, before)
    assert "50 rows of queue 1 from offset 200" in capsys.readouterr().out
    assert served(cluster.nameserver, plain[0]) - start == 50


def test_spark_reuses_a_pushed_plan_for_later_scans_of_the_same_loaded_dataframe(
    spark: Any, cluster: LocalCluster, plain: tuple[str, str]
) -> None:
    """A canary for a Spark bug the docs warn about (pyspark 4.1-4.3): the read plan made by
    filter pushdown is kept on the loaded DataFrame's source and reused by a later scan of it
    that Spark pushes no filter into (no filter at all, an OR, or the setting off). If this
    fails, Spark no longer does: drop the warning in docs/spark/pushdown.md."""
    topic, _ = plain
    df = spark.read.format("rocketmq").option("nameserver", cluster.nameserver).option("topic", topic).load()
    with pushdown(spark, True):
        assert df.where("queueId = 1").count() == 250
        unfiltered = df.count()
    fresh = spark.read.format("rocketmq").option("nameserver", cluster.nameserver).option("topic", topic).load()
    with pushdown(spark, True):
        assert fresh.count() == 2000
    assert unfiltered == 250  # the bug: 2,000 messages are there
