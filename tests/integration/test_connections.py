"""Who is connected, on real brokers: our group consumer and producer, a RocketMQ 4.x client
(ali-ons, and a raw client for a producer group) and the official RocketMQ 5 Python client are
listed per group with their address, language, version, protocol and subscriptions, and leave
the lists when they close."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from rocketmq import ClientConfiguration, Credentials, FilterExpression, SimpleConsumer
from rocketmq import Producer as V2Producer

from rocketspark import Admin, GroupConsumer, LocalCluster, Message, Producer
from rocketspark.client.connection_admin import ClientConnection, Subscribed
from rocketspark.client.heartbeats import client_version
from rocketspark.rocketmq4.codes import Code
from tests import rocketmq4
from tests.docblocks import blocks_run_by
from tests.helpers import eventually

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(brokers=2, processes=True, broker_config={"auto_create_topic_enable": False}) as c:
        with Admin(c.nameserver) as admin:
            for topic in ("conn-ours", "conn-ons", "conn-v5"):
                admin.create_topic(topic, queues=2)
        yield c


def _cli(cluster: LocalCluster, *args: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "rocketspark.cli", "admin", "-n", cluster.nameserver, *args, "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    document: dict[str, Any] = json.loads(done.stdout)
    return document


def test_our_group_consumer_and_producer_are_listed_with_their_groups_and_leave_when_closed(
    cluster: LocalCluster,
) -> None:
    with Admin(cluster.nameserver) as admin:
        producer = Producer(cluster.nameserver, group="conn-pg")
        for _ in range(4):  # round robin: both brokers hear of it
            producer.send(Message("conn-ours", b"x"))
        consumer = GroupConsumer(cluster.nameserver, "conn-cg", "conn-ours", lambda _: None, tags="A || B").start()
        try:
            [member] = admin.consumer_connections("conn-cg")
            assert (member.client_id, member.language, member.version, member.protocol) == (
                consumer.client_id,
                "PYTHON",
                client_version(),
                "rocketspark",
            )
            assert member.subscriptions == (Subscribed("conn-ours", "TAG", "A || B"),)
            assert member.brokers == ("broker-a", "broker-b") and member.address.startswith("127.0.0.1:")
            assert abs(member.last_seen_ms - time.time() * 1000) < 60_000
            [sender] = admin.producer_connections("conn-pg")
            assert (sender.client_id, sender.protocol, sender.subscriptions) == (producer.client_id, "rocketspark", ())
            assert sender.brokers == ("broker-a", "broker-b")
            assert admin.producer_groups()["conn-pg"] == [sender]
            assert admin.consumer_connections("no-such-group") == []
            shown = _cli(cluster, "consumer-connection", "conn-cg")["tables"][0]["rows"]
            assert [(r["client id"], r["protocol"], r["subscriptions"]) for r in shown] == [
                (consumer.client_id, "rocketspark", "conn-ours TAG A || B")
            ]
            shown = _cli(cluster, "producer-connection", "conn-pg")["tables"][0]["rows"]
            assert [(r["producer group"], r["client id"]) for r in shown] == [("conn-pg", producer.client_id)]
            assert ("conn-pg", producer.client_id) in [
                (r["producer group"], r["client id"]) for r in _cli(cluster, "producers")["tables"][0]["rows"]
            ]
        finally:
            consumer.stop()
            producer.close()
        assert admin.consumer_connections("conn-cg") == []
        assert admin.producer_connections("conn-pg") == []


def _producer_heartbeat(client: rocketmq4.RawClient, client_id: str, group: str) -> None:
    body = {"clientID": client_id, "producerDataSet": [{"groupName": group}], "consumerDataSet": []}
    client.call(Code.HEART_BEAT, body=json.dumps(body).encode())


def test_a_4x_push_consumer_and_producer_are_listed_as_remoting_clients(cluster: LocalCluster) -> None:
    options = {"nameSrv": cluster.nameserver, "topic": "conn-ons", "group": "conn-ons-g", "expression": "T1 || T2"}
    with rocketmq4.Consumer({**options, "seconds": 120}) as consumer, Admin(cluster.nameserver) as admin:

        def listed() -> list[ClientConnection]:
            """Once it heartbeat with its retry topic's subscription too (its first may come before it subscribed)."""
            assert not consumer.errors or consumer.process.poll() is None, consumer.errors[-5:]
            return [c for c in admin.consumer_connections("conn-ons-g") if len(c.subscriptions) == 2]

        [member] = eventually(listed, timeout_s=60)
        # ali-ons says what Java's client 3.4.9 says; it subscribes to its group's retry topic too, as Java's does
        assert (member.protocol, member.language, member.version) == ("remoting", "JAVA", "V3_4_9")
        assert member.subscriptions == (
            Subscribed("%RETRY%conn-ons-g", "TAG", "*"),
            Subscribed("conn-ons", "TAG", "T1 || T2"),
        )
        with rocketmq4.RawClient(cluster.brokers["broker-a"]) as raw:
            _producer_heartbeat(raw, "10.0.0.9@9", "conn-ons-pg")
            [sender] = admin.producer_connections("conn-ons-pg")
            assert (sender.client_id, sender.protocol, sender.brokers) == ("10.0.0.9@9", "remoting", ("broker-a",))
            assert (sender.language, sender.version) == ("PYTHON", "V5_3_3")  # what the raw client's frames say
            # mqadmin's consumerConnection and producerConnection, in RocketMQ's JSON
            answer = json.loads(raw.call(Code.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "conn-ons-g"}).body)
            [seen] = answer["connectionSet"]  # broker-a's view: its own connection from the client
            assert (seen["clientId"], seen["language"], seen["version"]) == (member.client_id, "JAVA", 121)
            assert seen["clientAddr"].startswith("127.0.0.1:")
            assert answer["subscriptionTable"]["conn-ons"]["subString"] == "T1 || T2"
            assert answer["subscriptionTable"]["conn-ons"]["tagsSet"] == ["T1", "T2"]
            answer = json.loads(raw.call(Code.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": "conn-ons-pg"}).body)
            assert [c["clientId"] for c in answer["connectionSet"]] == ["10.0.0.9@9"]
        eventually(lambda: admin.producer_connections("conn-ons-pg") == [])  # its connection closed
        consumer.stop()  # SIGTERM: its connections close
        eventually(lambda: admin.consumer_connections("conn-ons-g") == [], timeout_s=30)


def test_the_official_v5_producer_and_simple_consumer_are_listed_as_grpc_clients(cluster: LocalCluster) -> None:
    config = ClientConfiguration(cluster.grpc_endpoint, Credentials())
    producer = V2Producer(config, ("conn-v5",))
    producer.startup()
    consumer = SimpleConsumer(config, "conn-v5-g", {"conn-v5": FilterExpression("V1||V2")}, await_duration=2)
    consumer.startup()
    try:
        with Admin(cluster.nameserver) as admin:
            [sender] = eventually(lambda: admin.producer_connections("conn-v5"))  # a v5 producer: under its topic
            assert (sender.protocol, sender.language) == ("grpc", "PYTHON") and sender.version
            assert sender.address.startswith("127.0.0.1:")
            [member] = eventually(lambda: admin.consumer_connections("conn-v5-g"))
            assert (member.protocol, member.language) == ("grpc", "PYTHON")
            assert member.subscriptions == (Subscribed("conn-v5", "TAG", "V1||V2"),)
    finally:
        consumer.shutdown()
        producer.shutdown()
    with Admin(cluster.nameserver) as admin:  # each said it terminates
        eventually(
            lambda: admin.consumer_connections("conn-v5-g") == [] and admin.producer_connections("conn-v5") == []
        )


def test_the_docs_connection_commands_run_as_written(cluster: LocalCluster) -> None:
    [block] = blocks_run_by("tests/integration/test_connections.py::test_the_docs_connection_commands_run_as_written")
    prefix = ".venv/bin/rocketspark admin "
    lines = [line.removeprefix(prefix).split("#", 1)[0].strip() for line in block.text.splitlines()]
    assert lines == ["consumer-connection my-group", "producer-connection DEFAULT_PRODUCER", "producers"]
    with Producer(cluster.nameserver) as producer:  # in DEFAULT_PRODUCER
        producer.send(Message("conn-ours", b"x"))
        with GroupConsumer(cluster.nameserver, "my-group", "conn-ours", lambda _: None) as consumer:
            outputs = [_cli(cluster, *line.split())["tables"][0]["rows"] for line in lines]
    members, producers, groups = outputs
    assert [(r["client id"], r["language"], r["subscriptions"]) for r in members] == [
        (consumer.client_id, "PYTHON", "conn-ours TAG *")
    ]
    assert [(r["producer group"], r["client id"]) for r in producers] == [("DEFAULT_PRODUCER", producer.client_id)]
    assert ("DEFAULT_PRODUCER", producer.client_id) in [(r["producer group"], r["client id"]) for r in groups]
