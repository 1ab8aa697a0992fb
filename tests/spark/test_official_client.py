"""Spark and the official RocketMQ 5 clients, in one process (the stubs' own descriptor pool):
Spark reads what the official producer wrote (body, tag, keys and properties; never a half
message), and the official SimpleConsumer reads everything the Spark sink wrote."""

from __future__ import annotations

import time
from typing import Any

import pytest
from rocketmq import (
    ClientConfiguration,
    Credentials,
    FilterExpression,
    Producer,
    SimpleConsumer,
    TransactionChecker,
    TransactionResolution,
)
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


class Undecided(TransactionChecker):
    def check(self, message: V2Message) -> TransactionResolution:
        return TransactionResolution.UNKNOWN


def test_a_half_message_is_invisible_to_spark_until_its_transaction_commits(spark: Any, cluster: LocalCluster) -> None:
    with Admin(cluster.nameserver) as admin:
        admin.create_topic("ledger", queues=2)
    producer = Producer(ClientConfiguration(cluster.grpc_endpoint, Credentials()), ("ledger",), Undecided())
    producer.startup()

    def bodies() -> list[bytes]:
        frame = spark.read.format("rocketmq").option("nameserver", cluster.nameserver).option("topic", "ledger").load()
        return sorted(bytes(r.body) for r in frame.collect())

    try:
        rolled_back, committed = producer.begin_transaction(), producer.begin_transaction()
        for transaction, body in ((rolled_back, b"refund"), (committed, b"charge")):
            message = V2Message()
            message.topic, message.body = "ledger", body
            producer.send(message, transaction)
        assert bodies() == []  # both halves are held
        rolled_back.rollback()
        committed.commit()
        assert bodies() == [b"charge"]
    finally:
        producer.shutdown()


def test_the_official_simple_consumer_reads_everything_the_spark_sink_wrote(spark: Any, cluster: LocalCluster) -> None:
    with Admin(cluster.nameserver) as admin:
        admin.create_topic("spark-out", queues=3)
    rows = spark.range(300).selectExpr(
        "concat('row-', cast(id as string)) AS body",
        "'Tx' AS tag",
        "array(concat('k-', cast(id as string))) AS keys",
        "map('job', 'nightly') AS properties",
        "concat('account-', cast(id % 5 as string)) AS shardingKey",
    )
    rows.write.format("rocketmq").mode("append").option("nameserver", cluster.nameserver).option(
        "topic", "spark-out"
    ).save()
    consumer = SimpleConsumer(
        ClientConfiguration(cluster.grpc_endpoint, Credentials()), "from-spark", {"spark-out": FilterExpression()}, 2
    )
    consumer.startup()
    try:
        got: dict[bytes, Any] = {}
        deadline = time.monotonic() + 60
        while len(got) < 300 and time.monotonic() < deadline:
            for message in consumer.receive(32, 30):
                got[message.body] = message
                consumer.ack(message)
    finally:
        consumer.shutdown()
    assert sorted(got) == sorted(f"row-{i}".encode() for i in range(300))
    for i in (0, 7, 299):
        message = got[f"row-{i}".encode()]
        assert (message.tag, set(message.keys), message.message_group) == ("Tx", {f"k-{i}"}, f"account-{i % 5}")
        assert message.properties == {"job": "nightly"}
        assert message.born_timestamp > 0 and message.message_id
    assert {m.message_group for m in got.values()} == {f"account-{g}" for g in range(5)}


def test_a_priority_messages_priority_is_a_column_and_null_for_any_other(spark: Any, cluster: LocalCluster) -> None:
    with Admin(cluster.nameserver) as admin:
        admin.create_topic("ranked-orders", queues=2)
    producer = Producer(ClientConfiguration(cluster.grpc_endpoint, Credentials()), ("ranked-orders",))
    producer.startup()
    try:
        for body, priority in ((b"urgent", 5), (b"lowest", 0), (b"plain", None)):
            message = V2Message()
            message.topic, message.body = "ranked-orders", body
            if priority is not None:
                message.priority = priority
            producer.send(message)
    finally:
        producer.shutdown()
    frame = spark.read.format("rocketmq").option("nameserver", cluster.nameserver).option("topic", "ranked-orders")
    loaded = frame.load()
    assert loaded.schema["priority"].dataType.simpleString() == "int" and loaded.schema["priority"].nullable
    assert {bytes(r.body): r.priority for r in loaded.collect()} == {b"urgent": 5, b"lowest": 0, b"plain": None}
