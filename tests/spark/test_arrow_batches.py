"""The reader hands Spark large Arrow batches: pulls are decoded together until they hold at
least 32,000 rows (the Data Source API carries large batches several times faster)."""

from __future__ import annotations

from typing import Any

import pytest

from rocketspark import Admin, LocalCluster, Message, Producer
from rocketspark.spark.datasource import RocketMQDataSource
from rocketspark.spark.reading import MIN_ARROW_ROWS

pytestmark = pytest.mark.spark


def test_spark_gets_arrow_batches_of_at_least_32000_rows_where_the_range_allows(
    spark: Any, cluster: LocalCluster
) -> None:
    ns, topic, total = cluster.nameserver, "big-batches", 100_000
    with Admin(ns) as admin:
        admin.create_static_topic(topic, 1, brokers=["broker-a"])
    with Producer(ns) as producer:
        for start in range(0, total, 1000):
            producer.send_batch([Message(topic, f"{i:06d}".encode(), tags="t") for i in range(start, start + 1000)])
    options = {"nameserver": ns, "topic": topic, "pullBatchSize": "500", "endingOffsets": "latest"}
    source = RocketMQDataSource(options)
    reader = source.reader(source.schema())
    sizes: list[int] = []
    for partition in reader.partitions():  # what Spark asks of the reader, partition by partition
        sizes += [batch.num_rows for batch in reader.read(partition)]
    assert sum(sizes) == total
    assert all(size >= MIN_ARROW_ROWS for size in sizes[:-1]) and MIN_ARROW_ROWS >= 32_000, sizes
    assert len(sizes) <= total // MIN_ARROW_ROWS + 1  # though each pull returned at most a few hundred rows
    df = spark.read.format("rocketmq").options(**options).load()
    assert df.count() == total and df.where("tag = 't'").count() == total
