"""Nameserver subscriptions are bounded (issue 8, finding 6): they live and die with the client's
push stream, and each client has a cap, on real processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator

import pytest

from rocketspark import Admin, Consumer, LocalCluster
from rocketspark.protocol.codes import RequestCode, ResponseCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.types import Perm
from rocketspark.remoting.client import PushStream, RemotingClient
from tests.helpers import eventually

pytestmark = pytest.mark.integration


@pytest.fixture
def raw() -> Iterator[RemotingClient]:
    client = RemotingClient(peer_kind="nameserver")
    yield client
    client.close()


def subscribe(client: RemotingClient, ns: str, client_id: str, topics: list[str]) -> RemotingCommand:
    request = RemotingCommand.request(RequestCode.SUBSCRIBE_TOPIC_ROUTE, {"clientId": client_id, "topics": topics})
    return client.invoke(ns, request)


def refused_without_stream(answer: RemotingCommand, client_id: str, topics: list[str]) -> bool:
    """The answer to a subscription the nameserver kept nothing of: refused, and saying why."""
    assert answer.code == ResponseCode.SUBSCRIPTION_REFUSED, (answer.code, answer.remark)
    assert answer.ext["error"] == "SubscriptionRefusedError"
    assert answer.ext["streamOpen"] is False and answer.ext["refused"] == topics
    assert f'client "{client_id}" has no open push stream' in answer.remark
    assert "Open the push stream first" in answer.remark
    return True


def open_stream(client: RemotingClient, ns: str, client_id: str) -> PushStream:
    stream = client.open_push_stream(ns, client_id)
    registered = next(stream)  # the nameserver's answer that the stream is registered
    assert registered.is_response and registered.code == ResponseCode.SUCCESS
    return stream


def counters(ns: str) -> dict[str, int]:
    with Admin(ns) as admin:
        return admin.nameserver_counters()


def test_subscriptions_without_a_push_stream_are_not_kept(
    make_cluster: Callable[..., LocalCluster], raw: RemotingClient
) -> None:
    ns = make_cluster(brokers=1).nameserver
    for client in range(20):  # was: every one kept until restart (200 x 1,000 held 110 MB)
        topics = [f"topic-{i}" for i in range(50)]
        assert refused_without_stream(subscribe(raw, ns, f"no-stream-{client}", topics), f"no-stream-{client}", topics)
    after = counters(ns)
    assert after["subscriptions"] == 0 and after["subscriptionsWithoutStream"] == 1000


def test_a_closed_connection_takes_its_subscriptions_and_a_later_subscribe_keeps_nothing(
    make_cluster: Callable[..., LocalCluster], raw: RemotingClient
) -> None:
    ns = make_cluster(brokers=1).nameserver
    own = RemotingClient(peer_kind="nameserver")
    open_stream(own, ns, "c1")
    answer = subscribe(own, ns, "c1", ["a", "b", "c"])
    assert answer.code == ResponseCode.SUCCESS and answer.ext == {"streamOpen": True, "refused": []}
    assert (counters(ns)["subscriptions"], counters(ns)["pushStreams"]) == (3, 1)
    own.close()  # its connection ends: the registration and its subscriptions go with it
    eventually(lambda: (counters(ns)["subscriptions"], counters(ns)["pushStreams"]) == (0, 0), timeout_s=5)
    assert refused_without_stream(subscribe(raw, ns, "c1", ["a"]), "c1", ["a"])  # arrived after it closed
    assert counters(ns)["subscriptions"] == 0


def test_a_client_registered_again_keeps_its_subscriptions_until_its_new_connection_ends(
    make_cluster: Callable[..., LocalCluster], raw: RemotingClient
) -> None:
    ns = make_cluster(brokers=1).nameserver
    first, second = RemotingClient(peer_kind="nameserver"), RemotingClient(peer_kind="nameserver")
    try:
        open_stream(first, ns, "c2")
        assert subscribe(raw, ns, "c2", ["a", "b"]).code == ResponseCode.SUCCESS
        open_stream(second, ns, "c2")  # the client reconnects; its old connection ends later
        first.close()
        time.sleep(0.5)
        assert (counters(ns)["subscriptions"], counters(ns)["pushStreams"]) == (2, 1)
        second.close()
        eventually(lambda: counters(ns)["subscriptions"] == 0, timeout_s=5)
    finally:
        first.close()
        second.close()


CLIENT = textwrap.dedent(
    """
    import sys, time
    from rocketspark import Consumer
    from rocketspark.errors import NoRouteInfoError

    consumer = Consumer(sys.argv[1])
    for i in range(int(sys.argv[2])):
        try:
            consumer.routes.get(f"watched-{i}")  # missing: remembered and subscribed
        except NoRouteInfoError:
            pass
    assert consumer.routes.subscriber.connected.wait(20)
    print("ready", flush=True)
    time.sleep(600)
    """
)


def test_killed_client_processes_leave_no_subscription(make_cluster: Callable[..., LocalCluster]) -> None:
    ns = make_cluster(brokers=1).nameserver
    clients = [
        subprocess.Popen([sys.executable, "-c", CLIENT, ns, "40"], stdout=subprocess.PIPE, text=True) for _ in range(3)
    ]
    try:
        for client in clients:
            assert client.stdout is not None and client.stdout.readline().strip() == "ready"
        eventually(lambda: (counters(ns)["subscriptions"], counters(ns)["pushStreams"]) == (120, 3), timeout_s=10)
        for client in clients:
            os.kill(client.pid, signal.SIGKILL)
        eventually(lambda: (counters(ns)["subscriptions"], counters(ns)["pushStreams"]) == (0, 0), timeout_s=10)
    finally:
        for client in clients:
            client.kill()
            client.wait()


def test_a_client_over_its_cap_is_refused_the_rest_counted_and_polls_them(
    make_cluster: Callable[..., LocalCluster], raw: RemotingClient, caplog: pytest.LogCaptureFixture
) -> None:
    cluster = make_cluster(brokers=1, nameserver_config={"max_subscriptions_per_client": 5})
    ns = cluster.nameserver
    topics = [f"capped-{i}" for i in range(8)]
    own = RemotingClient(peer_kind="nameserver")
    open_stream(own, ns, "raw")  # on the wire: a partial refusal is a refusal, naming what and why
    answer = subscribe(raw, ns, "raw", topics)
    assert answer.code == ResponseCode.SUBSCRIPTION_REFUSED and answer.ext["error"] == "SubscriptionRefusedError"
    assert answer.ext["streamOpen"] is True and answer.ext["refused"] == topics[5:]
    assert 'client "raw" is at its cap of 5 route subscriptions' in answer.remark
    assert "3 of its 8 topic(s) were not kept" in answer.remark and "and 5 were" in answer.remark
    assert subscribe(raw, ns, "raw", topics[:5]).code == ResponseCode.SUCCESS  # all of these are kept
    own.close()  # the registration ends with its connection
    eventually(lambda: counters(ns)["subscriptions"] == 0, timeout_s=5)
    with Admin(ns) as admin, Consumer(ns, poll_interval_ms=1000) as consumer:
        for topic in topics:
            admin.create_topic(topic, queues=1)
            consumer.routes.get(topic)
        subscriber = consumer.routes.subscriber  # the refusal is an outcome: the stream still counts as up
        assert subscriber is not None and subscriber.connected.wait(10)
        eventually(lambda: len(subscriber.refused) == 3, timeout_s=5)
        assert subscriber.refused < set(topics) and consumer.routes.counters.subscriptions_refused >= 3
        after = admin.nameserver_counters()
        assert after["subscriptions"] == 5 and after["subscriptionsRefused"] >= 3

        admin.wipe_write_perm("broker-a")  # pushed to the 5, polled by the 3

        def writable(topic: str) -> bool:
            return bool(consumer.routes.get(topic).queues[0].perm & Perm.WRITE)

        eventually(lambda: not any(writable(t) for t in topics), timeout_s=5)
        assert consumer.routes.counters.notifications >= 1
    assert "at its cap of 5 route subscriptions" in (cluster.data_dir / "nameserver.log").read_text()
    warned = [r.getMessage() for r in caplog.records if r.name == "rocketspark.client.route_push"]
    assert any("route subscription partly refused" in m and "this client polls them" in m for m in warned), warned
