"""Spark reads what the official RocketMQ 5 client wrote through the v2 endpoint: body, tag,
keys and properties, in the same process as the client (the stubs' own descriptor pool)."""

from __future__ import annotations

from typing import Any

import pytest
from rocketmq import ClientConfiguration, Credentials, Producer
from rocketmq import Message as V2Message

from rocketspark import Admin, LocalCluster

pytestmark = pytest.mark.spark


def test_a_spark_batch_reads_what_the_official_producer_sent(spark: Any, cluster: LocalCluster) -> None:
    with Admin(cluster.nameserver) as admin:
        admin.create_static_topic("from-java-services", 2, brokers=["broker-a", "broker-b"])
    producer = Producer(ClientConfiguration(cluster.grpc_endpoint, Credentials()), ("from-java-services",))
    producer.startup()
    sent = {}
    try:
        for i in range(4):
            message = V2Message()
            message.topic, message.body, message.tag = "from-java-services", f"event-{i}".encode(), f"T{i % 2}"
            message.keys = f"key-{i}"
            message.add_property("source", "checkout")
            sent[f"event-{i}".encode()] = producer.send(message).message_id
    finally:
        producer.shutdown()
    frame = (
        spark.read.format("rocketmq")
        .option("nameserver", cluster.nameserver)
        .option("topic", "from-java-services")
        .option("includeProperties", "true")
        .load()
    )
    rows = {bytes(r.body): r for r in frame.collect()}
    assert set(rows) == set(sent)
    for i in range(4):
        row = rows[f"event-{i}".encode()]
        assert (row.tag, list(row.keys)) == (f"T{i % 2}", [f"key-{i}"])
        assert row.properties["source"] == "checkout" and row.properties["UNIQ_KEY"] == sent[bytes(row.body)]
