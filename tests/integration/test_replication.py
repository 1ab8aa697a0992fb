"""Replica groups on real processes: failover under load, fencing, reads from a slave, bad input.

Short timeouts throughout: the controller replaces a master silent for 1.5 s, replicas beat
every 200 ms and a master's lease lasts 1 s.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from rocketspark import Admin, Consumer, LocalCluster, Message, Producer
from rocketspark.cluster import write_toml
from rocketspark.errors import NotMasterError, RocketSparkError, SlaveNotAvailableError
from tests.helpers import docs_text, eventually

pytestmark = [pytest.mark.integration, pytest.mark.slow]

HEARTBEAT_TIMEOUT_S = 1.5
NAMESERVER = {"controller_broker_heartbeat_timeout_ms": int(HEARTBEAT_TIMEOUT_S * 1000)}
BROKER = {
    "auto_create_topic_enable": False,
    "controller_heartbeat_interval_ms": 200,
    "master_lease_ms": 1000,
    "ha_max_time_slave_not_catchup_ms": 1000,
    "ha_ack_timeout_ms": 2000,
    "segment_bytes": 256 * 1024,
    "max_message_bytes": 64 * 1024,
}


@pytest.fixture
def replica_cluster() -> Iterator[Callable[..., LocalCluster]]:
    started: list[LocalCluster] = []

    def make(replicas: int = 3, in_sync: int = 2) -> LocalCluster:
        config = {**BROKER, "in_sync_replicas": in_sync}
        cluster = LocalCluster(
            brokers=1, replicas=replicas, processes=True, broker_config=config, nameserver_config=NAMESERVER
        )
        started.append(cluster.start())
        wait_for(lambda: len(group(cluster).sync_state_set) == min(replicas, 3), "every replica in sync")
        return cluster

    yield make
    for cluster in started:
        cluster.stop()


def group(cluster: LocalCluster):  # type: ignore[no-untyped-def]
    with Admin(cluster.nameserver) as admin:
        return admin.replica_groups()["broker-a"]


def in_sync(cluster: LocalCluster) -> int:
    """The size of broker-a's SyncStateSet; 0 before the controller has heard of the group."""
    with Admin(cluster.nameserver) as admin:
        found = admin.replica_groups().get("broker-a")
    return 0 if found is None else len(found.sync_state_set)


def wait_for(condition: Callable[[], object], what: str, timeout_s: float = 20) -> float:
    started = time.monotonic()
    while not condition():
        assert time.monotonic() - started < timeout_s, f"timed out waiting for {what}"
        time.sleep(0.05)
    return time.monotonic() - started


class Load:
    """Producer threads sending to one queue each; records every acknowledged message."""

    def __init__(self, nameserver: str, topic: str, threads: int = 4) -> None:
        self.acked: dict[int, list[tuple[int, bytes]]] = {q: [] for q in range(threads)}
        self.stop = threading.Event()
        self.last_ok = time.monotonic()
        self.workers = [threading.Thread(target=self._run, args=(nameserver, topic, q)) for q in range(threads)]
        for w in self.workers:
            w.start()

    def _run(self, nameserver: str, topic: str, queue_id: int) -> None:
        with Producer(nameserver, send_timeout_ms=1500) as producer:
            i = 0
            while not self.stop.is_set():
                body = f"q{queue_id}-{i}".encode() * 8
                try:
                    result = producer.send(Message(topic, body, queue_id=queue_id))
                except RocketSparkError:
                    time.sleep(0.02)
                    continue
                self.acked[queue_id].append((result.queue_offset, body))
                self.last_ok = time.monotonic()
                i += 1

    def count(self) -> int:
        return sum(len(v) for v in self.acked.values())

    def finish(self) -> None:
        self.stop.set()
        for w in self.workers:
            w.join(30)


def read_queue(nameserver: str, topic: str, queue_id: int) -> dict[int, bytes]:
    got: dict[int, bytes] = {}
    with Consumer(nameserver) as consumer:
        offset = 0
        while True:
            pulled = consumer.pull(topic, queue_id, offset, max_messages=500)
            if pulled.next_offset <= offset:
                return got
            got.update((m.queue_offset, m.body) for m in pulled.messages)
            offset = pulled.next_offset


def assert_every_ack_readable(nameserver: str, topic: str, acked: dict[int, list[tuple[int, bytes]]]) -> None:
    for q, messages in acked.items():
        stored = read_queue(nameserver, topic, q)
        missing = [offset for offset, body in messages if stored.get(offset) != body]
        assert not missing, f"queue {q}: acknowledged messages lost or changed at offsets {missing[:10]}"


def segment_crcs(data_dir: Path, upto: int) -> list[int]:
    out = []
    for segment in sorted((data_dir / "commitlog").iterdir()):
        base = int(segment.name)
        if base >= upto:
            break
        out.append(zlib.crc32(segment.read_bytes()[: upto - base]))
    return out


def test_a_master_killed_three_times_under_load_loses_no_acknowledged_message(
    replica_cluster: Callable[..., LocalCluster],
) -> None:
    cluster = replica_cluster(replicas=3, in_sync=2)
    with Admin(cluster.nameserver) as admin:
        admin.create_topic("orders", queues=4)
    load = Load(cluster.nameserver, "orders")
    try:
        for _ in range(3):
            wait_for(lambda: load.count() > 200, "traffic")
            master = group(cluster).master
            assert master is not None
            before = load.count()
            cluster.kill(master)
            killed_at = time.monotonic()
            wait_for(lambda b=before, k=killed_at: load.count() > b + 50 and load.last_ok > k, "writes after the kill")
            resumed_after = load.last_ok - killed_at
            assert resumed_after <= HEARTBEAT_TIMEOUT_S + 2, f"writes resumed after {resumed_after:.1f} s"
            cluster.restart(master)  # it cuts what was never acknowledged and catches up
            wait_for(lambda m=master: m in group(cluster).sync_state_set, "the restarted replica back in sync")
    finally:
        load.finish()
    assert_every_ack_readable(cluster.nameserver, "orders", load.acked)
    ends = {r.address: r.offset for r in group(cluster).replicas}
    wait_for(lambda: len({r.offset for r in group(cluster).replicas}) == 1, "every replica at the same log end")
    confirmed = min(r.offset for r in group(cluster).replicas)
    dirs = [cluster.data_dir / f"broker-a-r{i}" for i in range(3)]
    crcs = [segment_crcs(d, confirmed) for d in dirs]
    assert crcs[0] == crcs[1] == crcs[2], f"replica logs differ below {confirmed}: {ends}"


def test_a_paused_master_acknowledges_nothing_that_is_lost_and_producers_move_on(
    replica_cluster: Callable[..., LocalCluster],
) -> None:
    cluster = replica_cluster(replicas=3, in_sync=2)
    with Admin(cluster.nameserver) as admin:
        admin.create_topic("fenced", queues=2)
    old = group(cluster).master
    assert old is not None
    load = Load(cluster.nameserver, "fenced", threads=2)
    try:
        wait_for(lambda: load.count() > 100, "traffic")
        cluster.pause(old)
        wait_for(lambda: group(cluster).master not in (None, old), "a new master")
        cluster.resume(old)  # it wakes up believing it is master: its lease has run out
        wait_for(lambda: load.count() > 400, "traffic after the resume")
        new = group(cluster).master
    finally:
        load.finish()
    assert new != old
    assert_every_ack_readable(cluster.nameserver, "fenced", load.acked)
    roles = {r.address: r.role for r in group(cluster).replicas}
    assert roles[old] == "slave"


def test_a_group_without_a_master_is_read_from_its_slave(replica_cluster: Callable[..., LocalCluster]) -> None:
    cluster = replica_cluster(replicas=2, in_sync=2)
    with Admin(cluster.nameserver) as admin:
        admin.create_topic("stranded", queues=2)
    acked: dict[int, list[tuple[int, bytes]]] = {0: [], 1: []}
    with Producer(cluster.nameserver) as producer:
        for i in range(100):
            body = f"m{i}".encode()
            acked[i % 2].append((producer.send(Message("stranded", body, queue_id=i % 2)).queue_offset, body))
    master = group(cluster).master
    slave = next(a for a in cluster.replicas_of("broker-a") if a != master)
    cluster.pause(slave)  # it falls out of the SyncStateSet: nothing more is acknowledged
    wait_for(lambda: group(cluster).sync_state_set == [master], "the slave out of the SyncStateSet")
    assert master is not None
    cluster.kill(master)
    cluster.resume(slave)
    wait_for(lambda: group(cluster).master is None, "the controller to depose the dead master")
    time.sleep(2 * HEARTBEAT_TIMEOUT_S)
    assert group(cluster).master is None  # never a replica outside the SyncStateSet
    assert_every_ack_readable(cluster.nameserver, "stranded", acked)


def test_bad_replica_configurations_are_refused_clearly(
    replica_cluster: Callable[..., LocalCluster], tmp_path: Path
) -> None:
    cluster = replica_cluster(replicas=2, in_sync=2)
    master = group(cluster).master
    slave = next(a for a in cluster.replicas_of("broker-a") if a != master)
    with Admin(cluster.nameserver) as admin, pytest.raises(RocketSparkError, match="SyncStateSet"):
        cluster.pause(slave)
        wait_for(lambda: slave not in group(cluster).sync_state_set, "the slave out of the SyncStateSet")
        admin.switchover("broker-a", to=slave)
    cluster.resume(slave)
    with Producer(cluster.nameserver) as producer, Admin(cluster.nameserver) as admin:
        admin.create_topic("bad", queues=1)
        wait_for(lambda: len(group(cluster).sync_state_set) == 2, "the slave back in sync")
        assert producer.send(Message("bad", b"ok", queue_id=0)).queue_offset == 0


def test_the_replica_admin_commands_of_the_docs_run(replica_cluster: Callable[..., LocalCluster]) -> None:
    cluster = replica_cluster(replicas=2, in_sync=1)
    master = group(cluster).master
    slave = next(a for a in cluster.replicas_of("broker-a") if a != master)
    env = {**os.environ, "ROCKETSPARK_NAMESRV": cluster.nameserver, "COLUMNS": "200"}
    cli = [sys.executable, "-m", "rocketspark.cli"]
    documented = docs_text("cluster/replicas.md")
    assert "rocketspark admin replicas " in documented and "rocketspark admin switchover broker-a --to " in documented

    shown = subprocess.run([*cli, "admin", "replicas"], capture_output=True, text=True, env=env, timeout=60)
    assert shown.returncode == 0 and master in shown.stdout and slave in shown.stdout
    moved = subprocess.run(
        [*cli, "admin", "switchover", "broker-a", "--to", slave], capture_output=True, text=True, env=env, timeout=60
    )
    assert moved.returncode == 0, moved.stderr
    wait_for(lambda: group(cluster).master == slave, "the switchover")
    with Producer(cluster.nameserver) as producer, Admin(cluster.nameserver) as admin:
        wait_for(lambda: created(admin, "after-switchover"), "the new master to take office")
        assert producer.send(Message("after-switchover", b"x", queue_id=0)).broker_name == "broker-a"


def created(admin: Admin, topic: str) -> bool:
    """Create a topic; False while the group's new master has not heard it took office."""
    try:
        admin.create_topic(topic, queues=1)
    except NotMasterError:
        return False
    return True


def run_broker(conf: Path, values: dict[str, object]) -> subprocess.CompletedProcess[str]:
    """Start ``python -m broker`` with ``values``; it is expected to refuse and exit."""
    write_toml(conf, values)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    return subprocess.run(
        [sys.executable, "-m", "broker", "--conf", str(conf)], capture_output=True, text=True, timeout=60, env=env
    )


def test_a_second_replica_claiming_a_live_replica_id_or_another_groups_data_is_refused(
    replica_cluster: Callable[..., LocalCluster], tmp_path: Path
) -> None:
    cluster = replica_cluster(replicas=2, in_sync=1)
    base = {
        "broker_name": "broker-a",
        "listen_host": "127.0.0.1",
        "listen_port": 0,
        "nameservers": [cluster.nameserver],
        "controller_mode": True,
        **BROKER,
    }
    twin = run_broker(tmp_path / "twin.toml", {**base, "replica_id": 1, "data_dir": str(tmp_path / "twin")})
    assert twin.returncode == 2
    assert "broker: " in twin.stderr and "replica" in twin.stderr.splitlines()[-1]
    live = cluster.data_dir / "broker-a-r0"
    before = sorted((p.relative_to(live), p.stat().st_size) for p in live.rglob("*") if p.is_file())
    intruder = run_broker(tmp_path / "i.toml", {**base, "replica_id": 0, "data_dir": str(live)})
    assert intruder.returncode == 2  # a live replica's directory: the lock stops it before it reads anything
    assert f"is in use by process {cluster.broker_pid('broker-a-r0')}" in intruder.stderr.splitlines()[-1]
    after = sorted((p.relative_to(live), p.stat().st_size) for p in live.rglob("*") if p.is_file())
    assert {name for name, _ in after} == {name for name, _ in before}  # nothing made, nothing removed
    copied = tmp_path / "copied" / "config"
    copied.mkdir(parents=True)
    shutil.copy(live / "config" / "identity.json", copied / "identity.json")
    stranger = run_broker(
        tmp_path / "b.toml",
        {**base, "broker_name": "broker-b", "replica_id": 0, "data_dir": str(copied.parent)},
    )
    assert stranger.returncode == 2
    assert "holds the data of replica 0 of broker group broker-a" in stranger.stderr.splitlines()[-1]
    assert set(group(cluster).sync_state_set) == set(cluster.replicas_of("broker-a"))  # nothing disturbed


def test_in_sync_replicas_larger_than_the_group_fails_sends_clearly(
    replica_cluster: Callable[..., LocalCluster],
) -> None:
    cluster = replica_cluster(replicas=2, in_sync=3)
    with Admin(cluster.nameserver) as admin, Producer(cluster.nameserver) as producer:
        admin.create_topic("too-few", queues=1)
        with pytest.raises(SlaveNotAvailableError, match=r"2 in-sync replica\(s\), fewer than in_sync_replicas = 3"):
            producer.send(Message("too-few", b"x", queue_id=0))


def test_failover_still_works_after_the_nameserver_leading_raft_is_killed() -> None:
    cluster = LocalCluster(
        brokers=1,
        replicas=3,
        nameservers=3,
        processes=True,
        broker_config={**BROKER, "in_sync_replicas": 2},
        nameserver_config=NAMESERVER,
    ).start()
    try:
        wait_for(lambda: in_sync(cluster) == 3, "every replica in sync", 40)
        with Admin(cluster.nameserver) as admin:
            admin.create_topic("ledger", queues=2)
            raft_leader: str = eventually(lambda: raft_leader_of(admin, cluster.nameserver_addresses), 20)
        load = Load(cluster.nameserver, "ledger", threads=2)
        try:
            wait_for(lambda: load.count() > 100, "traffic")
            cluster.kill_nameserver(raft_leader)  # SIGKILL the controller that leads Raft
            survivors = [a for a in cluster.nameserver_addresses if a != raft_leader]
            with Admin(";".join(survivors)) as admin:
                wait_for(lambda: raft_leader_of(admin, survivors) is not None, "a new Raft leader", 20)
            shown = subprocess.run(  # the docs' command: the dead nameserver, the two left and their leader
                [sys.executable, "-m", "rocketspark.cli", "admin", "controller"],
                capture_output=True,
                text=True,
                env={**os.environ, "ROCKETSPARK_NAMESRV": cluster.nameserver, "COLUMNS": "200"},
                timeout=60,
            )
            assert shown.returncode == 0 and raft_leader in shown.stdout and "yes" in shown.stdout, shown.stdout
            master = group(cluster).master
            assert master is not None
            before = load.count()
            cluster.kill(master)  # and now the group's master: the two left must elect a new one
            killed_at = time.monotonic()
            wait_for(lambda: load.count() > before + 50 and load.last_ok > killed_at, "writes after the kill")
            assert group(cluster).master not in (None, master)
        finally:
            load.finish()
        assert_every_ack_readable(cluster.nameserver, "ledger", load.acked)
    finally:
        cluster.stop()


def raft_leader_of(admin: Admin, nameservers: list[str]) -> str | None:
    """The nameserver whose controller leads Raft, when the given ones agree on one."""
    leaders = set()
    for address in nameservers:
        try:
            leaders.add(admin.controller_metadata(address)["controllerLeaderAddress"])
        except RocketSparkError:
            return None
    if len(leaders) != 1 or None in leaders:
        return None
    raft = leaders.pop()
    for address in nameservers:
        if admin.controller_metadata(address)["self"] == raft:
            return address
    return None
