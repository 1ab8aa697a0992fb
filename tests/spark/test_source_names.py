"""Named streaming sources (Spark 4.2's ``DataStreamReader.name()``): a rocketmq source keeps its
offsets by name when the query gains another source and restarts from the same checkpoint. The
named source is the one docs/spark/streaming.md builds, run from the page."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rocketspark import Admin, LocalCluster, Message, Producer
from tests.docblocks import blocks_run_by
from tests.spark.helpers import run_available_now

pytestmark = [pytest.mark.spark, pytest.mark.slow]
# Spark refuses source names unless this is on (SOURCE_NAMING_NOT_SUPPORTED otherwise); with it
# on, every source of a query must be named. The docs' block turns it on; this puts it back.
EVOLUTION = "spark.sql.streaming.queryEvolution.enableSourceEvolution"
TEST = "test_a_named_source_keeps_its_offsets_when_another_source_joins_the_query"


@pytest.fixture
def source_evolution(spark: Any) -> Iterator[None]:
    yield
    spark.conf.unset(EVOLUTION)


def _docs_source(nameserver: str) -> Any:
    """The page's named source ``orders`` (its SparkSession is the suite's: getOrCreate)."""
    [block] = blocks_run_by(f"tests/spark/test_source_names.py::{TEST}")
    namespace: dict[str, Any] = {}
    exec(block.text.replace("127.0.0.1:9876", nameserver), namespace)
    return namespace["orders"].selectExpr("topic", "CAST(body AS STRING) AS body")


def _named(spark: Any, nameserver: str, topic: str, name: str) -> Any:
    return (
        spark.readStream.format("rocketmq")
        .name(name)
        .option("nameserver", nameserver)
        .option("topic", topic)
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("topic", "CAST(body AS STRING) AS body")
    )


def _send(nameserver: str, topic: str, bodies: list[str]) -> None:
    with Producer(nameserver) as producer:
        producer.send_batch([Message(topic, b.encode(), queue_id=i % 2) for i, b in enumerate(bodies)])


def test_a_named_source_keeps_its_offsets_when_another_source_joins_the_query(
    spark: Any, cluster: LocalCluster, tmp_path: Path, source_evolution: None
) -> None:
    ns = cluster.nameserver
    with Admin(ns) as admin:
        admin.create_topic("orders", 2, brokers=["broker-a"])
        admin.create_topic("refunds", 2, brokers=["broker-b"])
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "cp")
    first = [f"order-{i}" for i in range(300)]
    _send(ns, "orders", first)
    run_available_now(_docs_source(ns), checkpoint, fmt="parquet", path=out)

    later, refunds = [f"order-{i}" for i in range(300, 500)], [f"refund-{i}" for i in range(120)]
    _send(ns, "orders", later)
    _send(ns, "refunds", refunds)
    both = _docs_source(ns).unionByName(_named(spark, ns, "refunds", "refunds"))
    run_available_now(both, checkpoint, fmt="parquet", path=out)

    rows = [(r.topic, r.body) for r in spark.read.parquet(out).collect()]
    assert sorted(rows) == sorted([("orders", b) for b in first + later] + [("refunds", b) for b in refunds])
    # each order once: the named source neither read its first 300 again nor skipped the next 200
