"""Nameserver registration, liveness, permissions and auto-create, on real processes."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable

import pytest

from rocketspark import Admin, Consumer, LocalCluster, Message, Producer
from rocketspark.cluster import ServerProcess
from rocketspark.errors import NoPermissionError
from tests.helpers import eventually

pytestmark = pytest.mark.integration

FAST = {"scan_interval_ms": 100, "broker_expired_ms": 1000}


def test_a_killed_broker_is_dropped_after_the_configured_silence(
    make_cluster: Callable[..., LocalCluster], topic_name: str
) -> None:
    cluster = make_cluster(brokers=2, nameserver_config=FAST, broker_config={"register_interval_ms": 200})
    with Admin(cluster.nameserver) as admin:
        admin.create_topic(topic_name, queues=1)
        cluster.kill_broker("broker-b")
        eventually(lambda: list(admin.cluster_list()["brokers"]) == ["broker-a"], timeout_s=5)
        assert [b.broker_name for b in admin.topic_route(topic_name).brokers] == ["broker-a"]
        assert admin.nameserver_counters()["droppedBrokers"] == 1


def test_a_cleanly_stopped_broker_unregisters_at_once(make_cluster: Callable[..., LocalCluster]) -> None:
    cluster = make_cluster(brokers=2)
    cluster.stop_broker("broker-b")
    with Admin(cluster.nameserver) as admin:
        brokers = list(admin.cluster_list()["brokers"])
    log = (cluster.data_dir / "broker-b.log").read_text()
    assert brokers == ["broker-a"], log[-2000:]


def test_wiping_write_permission_drains_a_broker_and_producers_skip_it(
    shared_cluster: LocalCluster, topic_name: str
) -> None:
    ns = shared_cluster.nameserver
    with Admin(ns) as admin, Producer(ns) as producer:
        admin.create_topic(topic_name, queues=2)
        admin.wipe_write_perm("broker-b")
        try:
            results = [producer.send(Message(topic_name, b"x")) for _ in range(20)]
            assert {r.broker_name for r in results} == {"broker-a"}
            with pytest.raises(NoPermissionError, match="not accepting writes"):
                producer.send(Message(topic_name, b"pinned", queue_id=2))  # a queue of broker-b
            assert admin.broker_runtime("broker-b")["perm"] == "R--"
        finally:
            admin.add_write_perm("broker-b")
        results = [producer.send(Message(topic_name, b"y")) for _ in range(20)]
        assert {r.broker_name for r in results} == {"broker-a", "broker-b"}


def test_auto_create_through_tbw102_uses_the_smaller_queue_count(
    make_cluster: Callable[..., LocalCluster], topic_name: str
) -> None:
    cluster = make_cluster(brokers=1, broker_config={"auto_create_topic_enable": True, "default_topic_queue_nums": 8})
    with Producer(cluster.nameserver, default_topic_queue_nums=4) as producer:
        result = producer.send(Message(topic_name, b"first"))
    assert result.broker_name == "broker-a"
    with Admin(cluster.nameserver) as admin:
        route = admin.topic_route(topic_name)  # registered before the send was answered, not at the heartbeat
    assert [(q.broker_name, q.write_queue_nums) for q in route.queues] == [("broker-a", 4)]


def test_an_auto_created_topic_stays_on_the_broker_that_took_the_first_send(
    make_cluster: Callable[..., LocalCluster], topic_name: str
) -> None:
    """The second auto-create pitfall of the docs (docs/cluster/multi-host.md): with two brokers
    offering TBW102, the topic is created on one of them, and the sends after the first all go
    there."""
    cluster = make_cluster(brokers=2, broker_config={"auto_create_topic_enable": True})
    with Producer(cluster.nameserver) as producer:
        first = producer.send(Message(topic_name, b"first")).broker_name
        rest = [producer.send(Message(topic_name, b"more")).broker_name for _ in range(20)]
    assert set(rest) == {first}  # the load is not spread
    with Admin(cluster.nameserver) as admin:
        assert [q.broker_name for q in admin.topic_route(topic_name).queues] == [first]
        template = admin.topic_route("TBW102")
        assert sorted(q.broker_name for q in template.queues) == ["broker-a", "broker-b"]  # either could have


def test_brokers_register_with_every_nameserver_and_clients_fail_over(
    make_cluster: Callable[..., LocalCluster], topic_name: str, tmp_path: object
) -> None:
    cluster = make_cluster(brokers=1)
    second = ServerProcess(
        "nameserver-2",
        [sys.executable, "-m", "nameserver", "--port", "0", "--data-dir", str(cluster.data_dir / "ns2")],
        cluster.data_dir / "ns2.log",
    )
    second_address = second.start()
    try:
        cluster.stop_broker("broker-a")
        cluster.broker_config["nameservers"] = [cluster.nameserver, second_address]
        cluster.start_broker("broker-a")
        with Admin([second_address]) as admin:
            admin.create_topic(topic_name, queues=1)
        dead = f"127.0.0.1:{_free()}"
        with Producer([dead, second_address]) as producer, Consumer([dead, cluster.nameserver]) as consumer:
            for _ in range(3):
                producer.send(Message(topic_name, b"x"))
            assert consumer.max_offset(topic_name, 0) == 3
    finally:
        second.stop()


def _free() -> int:
    from tests.helpers import free_port

    return free_port()


def test_the_broker_refuses_to_start_with_a_bad_config(tmp_path: object) -> None:
    from pathlib import Path

    conf = Path(str(tmp_path)) / "bad.toml"
    conf.write_text('broker_name = "b"\nsegmant_bytes = 1\n')
    done = subprocess.run(
        [sys.executable, "-m", "broker", "--conf", str(conf)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert "unknown key(s) segmant_bytes" in done.stderr
