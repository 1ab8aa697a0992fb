"""Who is connected: the broker's registry of clients (their groups, expiry, a closed
connection), what v2 settings put in it, a producer's announcements of its group, and the
admin's merge of every broker's view."""

from __future__ import annotations

from collections.abc import Callable

from broker.connections import GRPC, OURS, REMOTING, Connections, Subscribed, version_name
from rocketspark.client.connection_admin import ClientConnection, merged
from rocketspark.client.heartbeats import ProducerHeartbeats, client_version
from rocketspark.grpcv2 import connected
from rocketspark.grpcv2.stubs import definition_pb2 as pb
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.command import RemotingCommand


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class FakeChannel:
    """A connection that says when it closes (the registry's ``Closing`` seam)."""

    def __init__(self) -> None:
        self.callbacks: list[Callable[[], None]] = []

    def on_close(self, callback: Callable[[], None]) -> None:
        self.callbacks.append(callback)

    def close(self) -> None:
        for callback in self.callbacks:
            callback()


def _consumer(registry: Connections, client_id: str, channel: FakeChannel | None = None) -> None:
    registry.heard(
        client_id,
        address="10.0.0.1:5000",
        language="PYTHON",
        version="rocketspark 0.1.0",
        protocol=OURS,
        channel=channel,
        consumers={"etl": [Subscribed("orders", "TAG", "a || b")]},
    )


def test_a_consumer_is_listed_under_its_group_with_its_subscriptions() -> None:
    registry = Connections(120_000)
    _consumer(registry, "c1")
    [entry] = registry.consumers_of("etl")
    assert entry["clientId"] == "c1" and entry["address"] == "10.0.0.1:5000" and entry["protocol"] == OURS
    assert entry["subscriptions"] == [{"topic": "orders", "expressionType": "TAG", "expression": "a || b"}]
    assert registry.consumers_of("other") == [] and registry.producer_groups() == {}


def test_a_client_quiet_for_the_expiry_leaves_and_one_heard_again_stays() -> None:
    clock = Clock()
    registry = Connections(120_000, clock)
    _consumer(registry, "quiet")
    _consumer(registry, "alive")
    clock.now += 100
    assert registry.touch("alive") is True
    clock.now += 30
    assert [e["clientId"] for e in registry.consumers_of("etl")] == ["alive"]
    assert registry.touch("quiet") is False


def test_a_closed_connection_takes_its_client_away_unless_it_came_back_on_another() -> None:
    registry = Connections(120_000)
    first, second = FakeChannel(), FakeChannel()
    _consumer(registry, "c1", first)
    _consumer(registry, "c1", second)  # reconnected
    first.close()
    assert len(registry.consumers_of("etl")) == 1
    second.close()
    assert registry.consumers_of("etl") == []


def test_a_send_finds_its_client_by_the_id_it_names_or_by_its_connection_while_open() -> None:
    registry = Connections(120_000)
    channel, other = FakeChannel(), FakeChannel()
    registry.heard("p1", address="a:1", language="PYTHON", version="", protocol=OURS, channel=channel, producers=["pg"])
    found = registry.sender(channel)
    assert found is not None and found.client_id == "p1" and found.producer_groups == {"pg"}
    assert registry.sender(other) is None and registry.sender(None) is None
    assert registry.sender(None, "p1") is found and registry.sender(other, "unknown") is None
    channel.close()
    assert registry.sender(channel) is None and registry.by_channel == {}


def test_a_client_that_leaves_its_last_group_is_gone() -> None:
    registry = Connections(120_000)
    registry.heard("p1", address="a:1", language="JAVA", version="V4_9_4", protocol=REMOTING, producers=["pg"])
    _consumer(registry, "p1")
    registry.leave("p1", producer_group="pg")
    assert registry.producers_of("pg") == [] and len(registry.consumers_of("etl")) == 1
    registry.leave("p1", consumer_group="etl")
    assert registry.clients == {}


def test_producer_groups_list_every_group_with_its_clients() -> None:
    registry = Connections(120_000)
    for client_id, groups in (("b", ["orders", "payments"]), ("a", ["orders"])):
        registry.heard(client_id, address="h:1", language="GO", version="5.0.1", protocol=GRPC, producers=groups)
    groups = registry.producer_groups()
    assert list(groups) == ["orders", "payments"]
    assert [e["clientId"] for e in groups["orders"]] == ["a", "b"]


def test_a_4x_header_version_reads_as_rocketmq_names_it() -> None:
    assert version_name(401) == "V4_9_4"
    assert version_name(479) == "V5_3_3"  # the version our own frames speak as
    assert version_name(400) == "V4_9_4_SNAPSHOT"
    assert version_name(212) == "V4_0_0_SNAPSHOT"
    assert version_name(121) == "V3_4_9"  # what ali-ons sends
    assert version_name(15) == "V3_0_0_FINAL"
    assert version_name(47) == "V3_1_0"


def test_the_admin_merges_brokers_by_client_taking_the_latest_view() -> None:
    def entry(seen: int, address: str) -> dict[str, object]:
        subs = [{"topic": "t", "expressionType": "SQL92", "expression": "a > 1"}]
        return {
            "clientId": "c1",
            "address": address,
            "language": "JAVA",
            "version": "V4_9_4",
            "protocol": REMOTING,
            "lastSeenMs": seen,
            "subscriptions": subs,
        }

    [connection] = merged([("broker-b", entry(2000, "h:2")), ("broker-a", entry(1000, "h:1"))])
    assert connection == ClientConnection(
        "c1", "h:2", "JAVA", "V4_9_4", REMOTING, ("broker-a", "broker-b"), 2000, (Subscribed("t", "SQL92", "a > 1"),)
    )
    assert merged([]) == []


def test_a_v5_producer_is_listed_under_each_topic_and_a_consumer_under_its_group() -> None:
    registry = Connections(120_000)
    producer = pb.Settings(client_type=pb.ClientType.PRODUCER)
    producer.publishing.topics.add(name="orders")
    producer.publishing.topics.add(name="payments")
    metadata = {connected.LANGUAGE_HEADER: "GOLANG", connected.VERSION_HEADER: "5.1.0"}
    connected.noted(registry, "p1", metadata, "ipv4:127.0.0.1:5555", producer)
    consumer = pb.Settings(client_type=pb.ClientType.SIMPLE_CONSUMER)
    consumer.subscription.group.name = "etl"
    entry = consumer.subscription.subscriptions.add()
    entry.topic.name = "orders"
    entry.expression.type = pb.FilterType.SQL
    entry.expression.expression = "a > 1"
    consumer.user_agent.language = pb.Language.NODE_JS
    consumer.user_agent.version = "1.0.0"
    connected.noted(registry, "c1", {}, "ipv6:[::1]:6000", consumer)
    assert list(registry.producer_groups()) == ["orders", "payments"]
    [p] = registry.producers_of("orders")
    assert (p["address"], p["language"], p["version"], p["protocol"]) == ("127.0.0.1:5555", "GO", "5.1.0", GRPC)
    [c] = registry.consumers_of("etl")
    assert (c["address"], c["language"], c["version"]) == ("[::1]:6000", "NODE", "1.0.0")
    assert c["subscriptions"] == [{"topic": "orders", "expressionType": "SQL92", "expression": "a > 1"}]
    connected.heartbeat(registry, "c1", {}, "ipv4:127.0.0.1:1", "etl")  # known: a sign of life only
    assert registry.consumers_of("etl")[0]["subscriptions"] == c["subscriptions"]
    registry.gone("c1")
    assert registry.consumers_of("etl") == []


class RecordingCaller:
    """The producer's remoting client as heartbeats see it (the ``Caller`` seam): what was sent where."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, int, dict[str, object]]] = []

    def invoke_oneway(self, address: str, request: RemotingCommand, timeout_ms: int | None = None) -> None:
        self.sent.append((address, request.code, dict(request.ext)))


def test_a_producer_announces_its_group_once_per_broker_and_leaves_each_when_closed() -> None:
    caller = RecordingCaller()
    beats = ProducerHeartbeats(caller, "pg", "host@1@abc", interval_s=3600)
    for address in ("b:1", "a:1", "b:1", "a:1"):
        beats.seen(address)
    assert [(a, c) for a, c, _ in caller.sent] == [("b:1", RequestCode.HEART_BEAT), ("a:1", RequestCode.HEART_BEAT)]
    assert caller.sent[0][2] == {"producerGroup": "pg", "clientId": "host@1@abc", "clientVersion": client_version()}
    caller.sent.clear()
    beats.close()
    assert sorted((a, c) for a, c, _ in caller.sent) == [
        ("a:1", RequestCode.UNREGISTER_CLIENT),
        ("b:1", RequestCode.UNREGISTER_CLIENT),
    ]
    caller.sent.clear()
    beats.seen("c:1")  # closed: nothing more
    beats.close()
    assert caller.sent == []


def test_a_producer_without_a_group_announces_nothing() -> None:
    caller = RecordingCaller()
    beats = ProducerHeartbeats(caller, None, "host@1@abc")
    beats.seen("a:1")
    beats.close()
    assert caller.sent == []
