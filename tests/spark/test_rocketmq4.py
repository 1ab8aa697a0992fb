"""Spark reads what a RocketMQ 4.x client (ali-ons, the real npm package) sent: bodies, tags,
keys and the client id each message was given."""

from __future__ import annotations

from typing import Any

import pytest

from rocketspark import Admin, LocalCluster
from tests import rocketmq4

pytestmark = pytest.mark.spark


def test_a_spark_batch_reads_what_ali_ons_sent(spark: Any, cluster: LocalCluster) -> None:
    with Admin(cluster.nameserver) as admin:
        admin.create_topic("from-node-services", queues=2, brokers=["broker-a", "broker-b"])
    sent = rocketmq4.produce(
        {
            "nameSrv": cluster.nameserver,
            "topic": "from-node-services",
            "count": 12,
            "tags": ["paid", "refunded"],
            "keys": True,
        }
    )
    assert len([s for s in sent if s.get("status") == "SEND_OK"]) == 12
    frame = (
        spark.read.format("rocketmq")
        .option("nameserver", cluster.nameserver)
        .option("topic", "from-node-services")
        .option("includeProperties", "true")
        .load()
    )
    rows = {bytes(r.body): r for r in frame.collect()}
    assert set(rows) == {f"m-{i}".encode() for i in range(12)}
    for i in range(12):
        row = rows[f"m-{i}".encode()]
        assert (row.tag, list(row.keys)) == (["paid", "refunded"][i % 2], [f"key-{i}"])
        assert row.msgId == row.properties["UNIQ_KEY"]  # the client id the broker gave it
