"""Named streaming sources (Spark 4.2's ``DataStreamReader.name()``): a rocketmq source keeps its
offsets by name when the query gains another source and restarts from the same checkpoint."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rocketspark import Admin, LocalCluster, Message, Producer
from tests.spark.helpers import run_available_now

pytestmark = [pytest.mark.spark, pytest.mark.slow]
# Spark refuses source names unless this is on (SOURCE_NAMING_NOT_SUPPORTED otherwise); with it
# on, every source of a query must be named.
EVOLUTION = "spark.sql.streaming.queryEvolution.enableSourceEvolution"


@pytest.fixture
def source_evolution(spark: Any) -> Iterator[None]:
    spark.conf.set(EVOLUTION, "true")
    yield
    spark.conf.unset(EVOLUTION)


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
        admin.create_topic("named-orders", 2, brokers=["broker-a"])
        admin.create_topic("named-refunds", 2, brokers=["broker-b"])
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "cp")
    first = [f"order-{i}" for i in range(300)]
    _send(ns, "named-orders", first)
    run_available_now(_named(spark, ns, "named-orders", "orders"), checkpoint, fmt="parquet", path=out)

    later, refunds = [f"order-{i}" for i in range(300, 500)], [f"refund-{i}" for i in range(120)]
    _send(ns, "named-orders", later)
    _send(ns, "named-refunds", refunds)
    both = _named(spark, ns, "named-orders", "orders").unionByName(_named(spark, ns, "named-refunds", "refunds"))
    run_available_now(both, checkpoint, fmt="parquet", path=out)

    rows = [(r.topic, r.body) for r in spark.read.parquet(out).collect()]
    assert sorted(rows) == sorted(
        [("named-orders", b) for b in first + later] + [("named-refunds", b) for b in refunds]
    )  # each order once: the named source neither re-read its first 300 nor skipped the next 200
