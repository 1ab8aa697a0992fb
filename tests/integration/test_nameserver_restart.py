"""A restarted nameserver never says an existing topic does not exist: it answers "not ready"
until the brokers have registered with it again (within a second or so, as they check every
nameserver each second), and clients ask the other nameservers before concluding."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from rocketspark import Admin, Consumer, LocalCluster, Message, Producer
from rocketspark.errors import NameserverNotReadyError, NoRouteInfoError, TopicNotExistError
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.remoting.client import RemotingClient
from tests.helpers import eventually

pytestmark = pytest.mark.integration


def test_new_clients_resolve_an_existing_topic_while_one_of_three_nameservers_restarts_over_and_over(
    make_cluster: Callable[..., LocalCluster], topic_name: str
) -> None:
    cluster = make_cluster(brokers=2, nameservers=3)
    with Admin(cluster.nameserver) as admin:
        admin.create_topic(topic_name, queues=2)
    restarted = cluster.nameserver_addresses[0]
    others = cluster.nameserver_addresses[1:]
    resolved = 0
    for _ in range(4):
        cluster.kill_nameserver(restarted)
        cluster.restart_nameserver(restarted)
        for index in range(6):  # new clients, each starting from a nameserver of its own choice
            order = [restarted, *others] if index % 2 == 0 else [*others, restarted]
            with Consumer(order) as consumer:
                assert len(consumer.queues(topic_name)) == 4
            resolved += 1
        with Producer([restarted]) as producer:  # the restarted one alone: waits for it to be ready
            assert producer.send(Message(topic_name, b"x")).msg_id
    assert resolved == 24


def test_a_lone_restarted_nameserver_says_not_ready_until_the_brokers_register_again(
    make_cluster: Callable[..., LocalCluster], topic_name: str
) -> None:
    cluster = make_cluster(brokers=1, broker_config={"nameserver_heartbeat_interval_ms": 60_000})
    with Admin(cluster.nameserver) as admin:
        admin.create_topic(topic_name, queues=1)
    ns = cluster.nameserver
    cluster.kill_nameserver(ns)
    cluster.restart_nameserver(ns)
    raw = RemotingClient(peer_kind="nameserver")
    try:
        route = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic_name})
        answer = raw.invoke(ns, route)
        assert answer.code == NameserverNotReadyError.code  # the broker checks only every minute here
        assert "cannot say whether topic" in answer.remark and "broker-a" in answer.remark
        with Consumer(ns, timeout_ms=500) as consumer, pytest.raises(NameserverNotReadyError) as raised:
            consumer.queues(topic_name)
        assert not isinstance(raised.value, NoRouteInfoError)
        assert "Create it with" not in raised.value.message
    finally:
        raw.close()


def test_brokers_register_again_within_seconds_with_a_restarted_nameserver(
    make_cluster: Callable[..., LocalCluster], topic_name: str
) -> None:
    cluster = make_cluster(brokers=2)
    with Admin(cluster.nameserver) as admin:
        admin.create_topic(topic_name, queues=1)
    ns = cluster.nameserver
    cluster.kill_nameserver(ns)
    cluster.restart_nameserver(ns)
    with Admin(ns) as admin:  # the 30 s registration is far off: the 1 s data-version check did it

        def both_brokers() -> bool:
            try:
                route = admin.topic_route(topic_name)
            except NameserverNotReadyError:  # a loaded machine: the check has not run yet
                return False
            return sorted(b.broker_name for b in route.brokers) == ["broker-a", "broker-b"]

        eventually(both_brokers, timeout_s=20, interval_s=0.2)
        with pytest.raises(TopicNotExistError, match="knows no such topic"):  # ready: a missing topic is missing
            admin.topic_route(topic_name + "-never-made")
