"""The controller across three nameserver processes (a Raft group through pysyncobj): it
survives losing the nameserver that leads Raft, and a restarted nameserver rejoins with its
state from its journal."""

from __future__ import annotations

import os
import pickle
import socket
import struct
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pysyncobj import SyncObj, SyncObjConf

from rocketspark import Admin, LocalCluster
from rocketspark.cluster import ServerProcess
from rocketspark.errors import ControllerGroupNotExistError
from rocketspark.protocol.codes import RequestCode
from rocketspark.remoting.client import RemotingClient
from tests.fake_replica import call, child_env, nameserver_process, replicas
from tests.helpers import eventually, free_port

pytestmark = pytest.mark.integration
TIMEOUT_MS = 1500
SECRET = "raft-secret-" + "x" * 20  # controllers with peers must share one (it authenticates Raft)


class Nameservers:
    """Three nameservers whose controllers form one Raft group, started in ``directory``."""

    def __init__(self, directory: Path, count: int = 3) -> None:
        self.raft = [f"127.0.0.1:{free_port()}" for _ in range(count)]
        self.procs = [
            nameserver_process(
                directory,
                f"ns{i}",
                {
                    "controller_enable": True,
                    "controller_raft_address": address,
                    "controller_peers": [a for a in self.raft if a != address],
                    "cluster_secret": SECRET,
                    "controller_data_dir": str(directory / f"ns{i}-controller"),
                    "controller_broker_heartbeat_timeout_ms": TIMEOUT_MS,
                },
            )
            for i, address in enumerate(self.raft)
        ]
        self.client = RemotingClient(peer_kind="nameserver")

    def start(self, index: int) -> str:
        """Start (or restart: same Raft address and data directory) one nameserver."""
        return self.procs[index].start(child_env())

    @property
    def addresses(self) -> list[str]:
        return [p.address for p in self.procs]

    def metadata(self, index: int) -> dict[str, Any]:
        return call(self.client, self.procs[index].address, RequestCode.CONTROLLER_GET_METADATA_INFO)

    def group(self, index: int, name: str = "g") -> dict[str, Any]:
        """The group's view as nameserver ``index`` answers it."""
        address = self.procs[index].address
        return call(self.client, address, RequestCode.CONTROLLER_GET_REPLICA_INFO, {"brokerName": name})

    def leader_index(self, among: list[int]) -> int:
        """The nameserver that leads Raft, once the given ones agree on it."""

        def agreed() -> list[int]:  # a list: index 0 is falsy
            leaders = {self.metadata(i)["controllerLeaderAddress"] for i in among}
            if len(leaders) != 1 or None in leaders:
                return []
            index = self.raft.index(leaders.pop())
            return [index] if index in among and self.metadata(index)["isLeader"] else []

        found: list[int] = eventually(agreed, 15, 0.1)
        return found[0]

    def close(self) -> None:
        for proc in self.procs:
            proc.kill()
        self.client.close()


@pytest.fixture
def nameservers(tmp_path: Path) -> Iterator[Nameservers]:
    group = Nameservers(tmp_path)
    try:
        for index in range(3):
            group.start(index)
        yield group
    finally:
        group.close()


def test_failover_still_works_after_the_raft_leader_nameserver_is_killed(nameservers: Nameservers) -> None:
    leader = nameservers.leader_index([0, 1, 2])
    meta = nameservers.metadata(leader)
    assert meta["self"] == nameservers.raft[leader] and sorted(meta["peers"]) == sorted(
        a for a in nameservers.raft if a != meta["self"]
    )
    follower = (leader + 1) % 3
    with replicas(nameservers.addresses, "g", 3) as (r1, r2, r3):
        r1.register(nameservers.addresses[follower])  # through a follower: forwarded to the leader
        r2.register(nameservers.addresses[leader])
        r3.register(nameservers.addresses[follower])
        for r in (r1, r2, r3):
            r.start_beating()
        r1.max_offset = r2.max_offset = 2048
        r1.alter([1, 2], nameservers.addresses[follower])
        for i in range(3):  # every node applied it
            eventually(lambda i=i: nameservers.group(i)["syncStateSetEpoch"] == 2, 5)

        nameservers.procs[leader].kill()  # SIGKILL the Raft leader's nameserver
        survivors = [i for i in range(3) if i != leader]
        new_leader = nameservers.leader_index(survivors)
        assert new_leader != leader

        r1.stop_beating()  # and now the group's master lapses
        with Admin([nameservers.addresses[i] for i in survivors]) as admin:
            group = eventually(lambda: (g := admin.replica_groups()["g"]).master == r2.address and g, 15, 0.1)
            assert group.epoch == 2  # the epoch continued from the state the killed leader had agreed
            assert group.sync_state_set == [r2.address]
            assert r3.address != group.master

        nameservers.start(leader)  # it rejoins from its journal and catches up

        def caught_up() -> dict[str, Any] | None:
            try:
                view = nameservers.group(leader)
            except ControllerGroupNotExistError:  # still replaying
                return None
            return view if view["masterEpoch"] == 2 else None

        view = eventually(caught_up, 15, 0.1)
        assert view["master"] == r2.address and view["syncStateSet"] == [2]


def test_a_one_node_controller_keeps_its_state_across_a_restart(tmp_path: Path) -> None:
    proc: ServerProcess = nameserver_process(
        tmp_path,
        "ns",
        {
            "controller_enable": True,
            "controller_raft_address": f"127.0.0.1:{free_port()}",
            "controller_data_dir": str(tmp_path / "controller"),
            "controller_broker_heartbeat_timeout_ms": TIMEOUT_MS,
        },
    )
    client = RemotingClient(peer_kind="nameserver")
    try:
        ns = proc.start(child_env())
        with replicas([ns], "g", 2) as (r1, r2):
            r1.register()
            r2.register()
            r1.alter([1, 2])
        proc.kill()
        ns = proc.start(child_env())
        view = call(client, ns, RequestCode.CONTROLLER_GET_REPLICA_INFO, {"brokerName": "g"})
        assert (view["masterReplicaId"], view["masterEpoch"], view["syncStateSet"], view["syncStateSetEpoch"]) == (
            1,
            1,
            [1, 2],
            2,
        )
        assert [r["replicaId"] for r in view["replicas"]] == [1, 2]
    finally:
        proc.kill()
        client.close()


class _RunsACommand:
    """What an attacker pickles: unpickling it runs a shell command that leaves a marker file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {self.marker}",))


def _send_pysyncobj_frame(address: str, payload: object) -> bool:
    """One pysyncobj frame (int32 length, zlib'd pickle) to a Raft port, as an unsecured node
    parses it; True when the peer then closed the connection on us."""
    host, port = address.rsplit(":", 1)
    data = zlib.compress(pickle.dumps(payload), 3)
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(struct.pack("i", len(data)) + data)
        sock.settimeout(5)
        try:
            return sock.recv(1) == b""
        except TimeoutError:
            return False


def test_the_exploit_runs_on_an_unsecured_pysyncobj_port(tmp_path: Path) -> None:
    """The payload of the next test is a real exploit: a pysyncobj node without a password
    (what our controllers ran before) executes it."""
    marker = tmp_path / "pwned"
    me, other = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
    node = SyncObj(me, [other], SyncObjConf(autoTick=True, connectionRetryTime=60))
    try:
        node.waitBinded()
        _send_pysyncobj_frame(me, _RunsACommand(marker))
        eventually(marker.exists, 10, 0.05)
    finally:
        node.destroy()


def test_a_pickle_sent_to_the_raft_port_runs_nothing_and_the_controller_keeps_working(
    nameservers: Nameservers, tmp_path: Path
) -> None:
    marker = tmp_path / "pwned"
    leader = nameservers.leader_index([0, 1, 2])
    for address in nameservers.raft:  # every node, the leader included
        assert _send_pysyncobj_frame(address, _RunsACommand(marker)), f"{address} kept a stranger's connection"
    with replicas(nameservers.addresses, "g", 2) as (r1, r2):  # Raft still commits
        r1.register(nameservers.addresses[leader])
        r2.register(nameservers.addresses[(leader + 1) % 3])
        r1.alter([1, 2], nameservers.addresses[(leader + 2) % 3])
        for i in range(3):
            eventually(lambda i=i: nameservers.group(i)["syncStateSet"] == [1, 2], 5)
    assert nameservers.leader_index([0, 1, 2]) == leader  # no node fell over
    assert not marker.exists()


def test_a_one_node_controller_opens_no_raft_port(make_cluster: Callable[..., LocalCluster]) -> None:
    cluster = make_cluster(brokers=1, replicas=2)
    with Admin(cluster.nameserver) as admin:
        raft = admin.controller_metadata(cluster.nameserver_addresses[0])["self"]
        assert admin.replica_groups()["broker-a"].master  # the controller works
    host, port = raft.rsplit(":", 1)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((host, int(port)), timeout=5).close()
