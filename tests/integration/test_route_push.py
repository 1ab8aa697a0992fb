"""Routing that reacts in a second: route-change push, hotspot rule, negative cache, expiry."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Callable

import pytest
from prometheus_client.parser import text_string_to_metric_families

from rocketspark import Admin, Consumer, LocalCluster, Message, Producer
from rocketspark.errors import NoRouteInfoError
from rocketspark.protocol.types import Perm
from tests.helpers import eventually

pytestmark = pytest.mark.integration
NO_POLL = 3_600_000  # the 30 s refresh is pushed out of the way: only notifications can help


def subscribed(client: Consumer | Producer, topic: str) -> None:
    client.routes.get(topic)
    assert client.routes.subscriber is not None
    assert client.routes.subscriber.connected.wait(10)
    time.sleep(0.3)  # a topic looked up after the stream opened is subscribed asynchronously


def test_a_subscribed_client_sees_route_changes_within_two_seconds(
    make_cluster: Callable[..., LocalCluster],
) -> None:
    cluster = make_cluster(brokers=2)
    ns = cluster.nameserver
    with Admin(ns) as admin, Consumer(ns, poll_interval_ms=NO_POLL) as consumer:
        admin.create_topic("pushed", queues=2)
        admin.create_static_topic("pushed-static", 2, brokers=["broker-a"])
        subscribed(consumer, "pushed")
        subscribed(consumer, "pushed-static")

        def perm_of(broker: str) -> int:
            route = consumer.routes.cached("pushed")
            return next(q.perm for q in route.queues if q.broker_name == broker) if route else -1

        started = time.monotonic()
        admin.wipe_write_perm("broker-b")
        eventually(lambda: perm_of("broker-b") == Perm.READ, timeout_s=2.5, interval_s=0.02)
        assert time.monotonic() - started < 2.0

        started = time.monotonic()
        admin.add_write_perm("broker-b")  # restored: pushed as well
        eventually(lambda: perm_of("broker-b") == Perm.READ_WRITE, timeout_s=2.5, interval_s=0.02)
        assert time.monotonic() - started < 2.0

        started = time.monotonic()
        admin.remap_static_topic("pushed-static", [0], "broker-b")
        eventually(
            lambda: consumer.queues("pushed-static")[0].segments[-1].broker_name == "broker-b",
            timeout_s=2.5,
            interval_s=0.02,
        )
        assert time.monotonic() - started < 2.0

        started = time.monotonic()
        admin.delete_topic("pushed")
        eventually(lambda: "pushed" not in consumer.routes.cached_topics(), timeout_s=2.5, interval_s=0.02)
        assert time.monotonic() - started < 2.0
        sent = pushes(cluster, "sent")  # the metric counts the pushes the counters count (read after it)
        counters = admin.nameserver_counters()
        assert counters["notificationsSent"] >= 4 and counters["subscriptions"] >= 1
        assert 4 <= sent <= counters["notificationsSent"]
        assert consumer.routes.counters.notifications >= 4  # each change reached the client by a push


def pushes(cluster: LocalCluster, result: str) -> float:
    """The nameserver's ``rocketspark_route_pushes_total`` of ``result``, as Prometheus reads it."""
    with urllib.request.urlopen(cluster.metrics_urls["nameserver"], timeout=10) as response:
        families = text_string_to_metric_families(response.read().decode())
    return sum(
        s.value
        for family in families
        for s in family.samples
        if s.name == "rocketspark_route_pushes_total" and s.labels["result"] == result
    )


def test_a_broker_restart_with_500_topics_causes_no_notification_storm(
    make_cluster: Callable[..., LocalCluster],
) -> None:
    cluster = make_cluster(brokers=1)
    ns = cluster.nameserver
    topics = [f"many-{i:03d}" for i in range(500)]
    with Admin(ns) as admin, Consumer(ns, poll_interval_ms=NO_POLL) as consumer:
        for topic in topics:
            admin.create_topic(topic, queues=1)
        for topic in topics:
            consumer.routes.get(topic)
        assert consumer.routes.subscriber is not None and consumer.routes.subscriber.connected.wait(10)
        eventually(lambda: admin.nameserver_counters()["subscriptions"] == 500, timeout_s=10)
        time.sleep(1.5)  # let any notification of the creations go out first
        before = admin.nameserver_counters()
        notified_before = consumer.routes.counters.notifications

        cluster.stop_broker("broker-a")  # unregisters 500 topics
        cluster.start_broker("broker-a")  # registers them again, in one registration
        time.sleep(2.5)  # two notify rounds
        suppressed = pushes(cluster, "suppressed")
        after = admin.nameserver_counters()
    assert after["notificationsSent"] == before["notificationsSent"]
    assert consumer.routes.counters.notifications == notified_before
    assert after["notificationsSuppressed"] - before["notificationsSuppressed"] >= 1000  # 500 gone, 500 back
    assert before["notificationsSuppressed"] + 1000 <= suppressed <= after["notificationsSuppressed"]


def test_ten_thousand_sends_to_a_missing_topic_cost_a_handful_of_route_queries(
    shared_cluster: LocalCluster,
) -> None:
    ns = shared_cluster.nameserver
    with Admin(ns) as admin, Producer(ns) as producer:
        before = int(admin.nameserver_counters()["requests"].get("105", 0))
        for _ in range(10_000):
            with pytest.raises(NoRouteInfoError, match='No route info of this topic "never-there"'):
                producer.send(Message("never-there", b"x"))
        after = int(admin.nameserver_counters()["requests"].get("105", 0))
    assert after - before <= 6  # the topic and TBW102, once per negative-cache TTL


def test_a_created_topic_is_usable_at_once_despite_the_negative_cache(shared_cluster: LocalCluster) -> None:
    ns = shared_cluster.nameserver
    with Admin(ns) as admin, Producer(ns, not_found_ttl_ms=60_000) as producer:
        with pytest.raises(NoRouteInfoError):
            producer.send(Message("late-topic", b"x"))
        assert producer.routes.subscriber is not None and producer.routes.subscriber.connected.wait(10)
        time.sleep(0.3)
        admin.create_topic("late-topic", queues=1)
        eventually(lambda: "late-topic" not in producer.routes.missing_topics(), timeout_s=2.5, interval_s=0.02)
        assert producer.send(Message("late-topic", b"now")).queue_offset == 0


def test_an_unused_topic_expires_from_the_cache_and_its_subscription(shared_cluster: LocalCluster) -> None:
    ns = shared_cluster.nameserver
    with Admin(ns) as admin:
        admin.create_topic("fleeting", queues=1)
        with Consumer(ns, topic_expiry_ms=600) as consumer:
            subscribed(consumer, "fleeting")
            assert "fleeting" in consumer.routes.cached_topics()
            subscriptions = admin.nameserver_counters()["subscriptions"]
            eventually(lambda: "fleeting" not in consumer.routes.cached_topics(), timeout_s=5)
            assert consumer.routes.counters.expired >= 1
            eventually(lambda: admin.nameserver_counters()["subscriptions"] == subscriptions - 1, timeout_s=5)


def test_a_nameserver_under_pressure_pauses_pushes_but_still_serves_routes(
    make_cluster: Callable[..., LocalCluster],
) -> None:
    cluster = make_cluster(brokers=1, nameserver_config={"notify_max_memory_used": 0.0})  # always "tight"
    ns = cluster.nameserver
    with Admin(ns) as admin, Consumer(ns, poll_interval_ms=NO_POLL) as consumer:
        admin.create_topic("paused", queues=1)
        subscribed(consumer, "paused")
        admin.wipe_write_perm("broker-a")
        eventually(lambda: admin.nameserver_counters()["notifyDegradedRounds"] >= 2, timeout_s=5)
        assert admin.nameserver_counters()["notificationsSent"] == 0
        assert consumer.routes.counters.notifications == 0
        stale = consumer.routes.cached("paused")
        assert stale is not None and stale.queues[0].perm & Perm.WRITE  # stale until the refresh
        assert admin.topic_route("paused").queues[0].perm == Perm.READ  # queries are still answered
    assert "route-change notification paused: memory used" in (cluster.data_dir / "nameserver.log").read_text()


def test_subscriptions_move_when_the_nameserver_list_changes(make_cluster: Callable[..., LocalCluster]) -> None:
    import sys

    from rocketspark.cluster import ServerProcess

    cluster = make_cluster(brokers=1)
    second = ServerProcess(
        "ns2",
        [sys.executable, "-m", "nameserver", "--port", "0", "--data-dir", str(cluster.data_dir / "ns2")],
        cluster.data_dir / "ns2.log",
    )
    other = second.start()
    try:
        cluster.stop_broker("broker-a")
        cluster.broker_config["nameservers"] = [cluster.nameserver, other]
        cluster.start_broker("broker-a")
        with Admin(cluster.nameserver) as admin:
            admin.create_topic("moving", queues=1)
        with Consumer(cluster.nameserver) as consumer, Admin(other) as admin2, Admin(cluster.nameserver) as admin1:
            subscribed(consumer, "moving")
            eventually(lambda: admin1.nameserver_counters()["subscriptions"] == 1, timeout_s=5)
            consumer.update_nameservers([other])
            eventually(lambda: admin2.nameserver_counters()["subscriptions"] == 1, timeout_s=5)
            eventually(lambda: admin1.nameserver_counters()["subscriptions"] == 0, timeout_s=5)
    finally:
        second.stop()
