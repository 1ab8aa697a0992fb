"""Replicas that survive their supervisors, with the default settings: a master killed and
restarted before, during or after its election rejoins as the controller decides (never
exiting over an epoch), a send to a group with no master waits for the new one, and a second
process on a live data directory stops at once, touching nothing."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from rocketspark import Admin, Consumer, LocalCluster, Message, Producer
from rocketspark.cluster import write_toml
from rocketspark.protocol.codes import RequestCode, ResponseCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.remoting.client import RemotingClient
from tests.helpers import eventually

pytestmark = [pytest.mark.integration, pytest.mark.slow]
TOPIC = "orders"


@pytest.fixture
def cluster_of() -> Iterator[Callable[..., LocalCluster]]:
    started: list[LocalCluster] = []

    def make(replicas: int = 3, in_sync: int = 2, **nameserver: object) -> LocalCluster:
        cluster = LocalCluster(
            brokers=1,
            replicas=replicas,
            processes=True,
            broker_config={"in_sync_replicas": in_sync, "auto_create_topic_enable": False},
            nameserver_config=dict(nameserver),
        ).start()
        started.append(cluster)
        eventually(lambda: len(view(cluster).sync_state_set) == replicas, timeout_s=30, interval_s=0.1)
        with Admin(cluster.nameserver) as admin:
            admin.create_topic(TOPIC, queues=2)
        for replica in cluster.replicas_of("broker-a"):  # the topic is on every replica before anything fails
            eventually(lambda replica=replica: has_topic(replica), timeout_s=30, interval_s=0.1)
        return cluster

    yield make
    for cluster in started:
        cluster.stop()


def has_topic(replica: str) -> bool:
    client = RemotingClient()
    try:
        request = RemotingCommand.request(RequestCode.GET_TOPIC_CONFIG, {"topic": TOPIC})
        return client.invoke(replica, request).code == ResponseCode.SUCCESS
    finally:
        client.close()


def view(cluster: LocalCluster):  # type: ignore[no-untyped-def]
    with Admin(cluster.nameserver) as admin:
        return admin.replica_groups()["broker-a"]


def send(cluster: LocalCluster, bodies: list[bytes], timeout_ms: int = 20_000) -> list[tuple[int, int, bytes]]:
    """Send each body (one at a time) and return (queue, offset, body) of each acknowledgement."""
    with Producer(cluster.nameserver, send_timeout_ms=timeout_ms) as producer:
        return [(r.queue_id, r.queue_offset, body) for body in bodies for r in [producer.send(Message(TOPIC, body))]]


def assert_readable(cluster: LocalCluster, acked: list[tuple[int, int, bytes]]) -> None:
    with Consumer(cluster.nameserver) as consumer:
        for queue_id, offset, body in acked:
            pulled = consumer.pull(TOPIC, queue_id, offset, max_messages=1)
            assert pulled.messages and pulled.messages[0].body == body, f"lost: queue {queue_id} offset {offset}"


def test_a_master_restarted_before_any_election_rejoins_in_a_new_epoch(cluster_of: Callable[..., LocalCluster]) -> None:
    cluster = cluster_of(controller_broker_heartbeat_timeout_ms=120_000)  # nobody is judged dead in this test
    before = view(cluster)
    master = before.master
    slaves = [a for a in cluster.replicas_of("broker-a") if a != master]
    acked = send(cluster, [f"before-{i}".encode() for i in range(20)])
    for slave in slaves:  # paused: they cannot report the master gone, so no election runs
        cluster.pause(slave)
    cluster.kill(master)
    assert cluster.restart(master) == master  # it starts; it does not exit over its epoch file
    after = view(cluster)
    assert after.master == master and after.epoch == before.epoch + 1  # a new term, never the old one resumed
    for slave in slaves:
        cluster.resume(slave)
    eventually(lambda: len(view(cluster).sync_state_set) == 3, timeout_s=30, interval_s=0.1)
    acked += send(cluster, [f"after-{i}".encode() for i in range(20)])
    assert_readable(cluster, acked)


def test_a_master_killed_and_restarted_at_once_again_and_again_rejoins_every_time(
    cluster_of: Callable[..., LocalCluster],
) -> None:
    cluster = cluster_of()  # default timeouts: the restart races the election
    acked = send(cluster, [b"first"])
    epochs = [view(cluster).epoch]
    for round_ in range(3):
        master = view(cluster).master
        cluster.kill(master)
        assert cluster.restart(master) == master
        acked += send(cluster, [f"round-{round_}-{i}".encode() for i in range(10)])  # waits for a master
        eventually(lambda: len(view(cluster).sync_state_set) == 3, timeout_s=30, interval_s=0.1)
        epochs.append(view(cluster).epoch)
    assert epochs == sorted(set(epochs))  # every round a new epoch
    assert_readable(cluster, acked)


def test_a_send_to_a_group_without_a_master_waits_for_the_new_one(cluster_of: Callable[..., LocalCluster]) -> None:
    cluster = cluster_of(replicas=2, in_sync=1)
    master = view(cluster).master
    cluster.kill(master)  # the only group of the topic: nowhere else to send
    acked = send(cluster, [b"during the election"])  # not 'connection refused' within milliseconds
    survivor = next(a for a in cluster.replicas_of("broker-a") if a != master)
    assert view(cluster).master == survivor
    assert_readable(cluster, acked)


def test_a_second_broker_on_a_live_data_dir_stops_at_once_and_the_owner_still_recovers_as_after_a_crash(
    make_cluster: Callable[..., LocalCluster], tmp_path: Path
) -> None:
    cluster = make_cluster(brokers=1)
    with Admin(cluster.nameserver) as admin:
        admin.create_topic(TOPIC, queues=1)
    with Producer(cluster.nameserver) as producer:
        producer.send_batch([Message(TOPIC, f"m{i}".encode()) for i in range(200)])
    data_dir = cluster.data_dir / "broker-a"
    files = sorted(p.relative_to(data_dir) for p in data_dir.rglob("*"))
    conf = tmp_path / "twin.toml"
    write_toml(conf, {**cluster.broker_values("broker-a"), "listen_port": 0})
    twin = subprocess.run(
        [sys.executable, "-m", "broker", "--conf", str(conf)], capture_output=True, text=True, timeout=60
    )
    assert twin.returncode == 2
    pid = cluster.broker_pid("broker-a")
    assert twin.stderr.strip().splitlines()[-1].startswith(f"broker: data_dir {data_dir} is in use by process {pid}")
    assert sorted(p.relative_to(data_dir) for p in data_dir.rglob("*")) == files  # nothing made or removed

    cluster.kill_broker("broker-a")
    cluster.start_broker("broker-a")
    recoveries = [
        line for line in (cluster.data_dir / "broker-a.log").read_text().splitlines() if "recovery after" in line
    ]
    assert "store recovery after a crash" in recoveries[-1]  # the twin never marked the store stopped cleanly
    with Consumer(cluster.nameserver) as consumer:
        assert len(consumer.pull(TOPIC, 0, 0, max_messages=500).messages) == 200
