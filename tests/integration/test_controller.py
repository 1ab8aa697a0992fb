"""The controller in one nameserver process (a one-node Raft group): registration, elections
from the SyncStateSet only, switchover rules, and what Admin and the CLI show."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rocketspark import Admin, LocalCluster, ReplicaGroup
from rocketspark.errors import (
    ControllerBrokerNotAliveError,
    ControllerElectMasterFailedError,
    ControllerInvalidMasterError,
    ControllerNeedRegisterError,
    ControllerNotEnabledError,
    ControllerReplicaIdInvalidError,
    InvalidParameterError,
)
from rocketspark.protocol.codes import RequestCode
from tests.fake_replica import FakeReplica, call, replicas
from tests.helpers import eventually, free_port

pytestmark = pytest.mark.integration
TIMEOUT_MS = 1500
CLI = [sys.executable, "-m", "rocketspark.cli"]


def controller_config(tmp_path: Path) -> dict[str, Any]:
    return {
        "controller_enable": True,
        "controller_raft_address": f"127.0.0.1:{free_port()}",
        "controller_data_dir": str(tmp_path / "controller"),
        "controller_broker_heartbeat_timeout_ms": TIMEOUT_MS,
    }


def group_of(admin: Admin, name: str = "g") -> ReplicaGroup:
    return admin.replica_groups()[name]


def cli(nameserver: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, "admin", "-n", nameserver, *args], capture_output=True, text=True, timeout=60)


def watch_master(admin: Admin, until: Callable[[ReplicaGroup], bool], timeout_s: float) -> list[str | None]:
    """Every master the group had while waiting for ``until`` (which must come true)."""
    seen: list[str | None] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        group = group_of(admin)
        if not seen or seen[-1] != group.master:
            seen.append(group.master)
        if until(group):
            return seen
        time.sleep(0.05)
    raise AssertionError(f"not reached within {timeout_s} s; masters seen: {seen}")


def test_a_lapsed_master_is_replaced_from_the_sync_state_set_only(
    make_cluster: Callable[..., LocalCluster], tmp_path: Path
) -> None:
    ns = make_cluster(brokers=0, nameserver_config=controller_config(tmp_path)).nameserver
    with replicas([ns], "g", 3) as (r1, r2, r3), Admin(ns) as admin:
        assert r1.register()["master"] == r1.address and r1.view["masterEpoch"] == 1  # the first one leads
        for r in (r2, r3):
            view = r.register()
            assert view["master"] == r1.address and view["masterReplicaId"] == 1 and view["masterEpoch"] == 1
        for r in (r1, r2, r3):
            r.start_beating()
        r1.max_offset, r2.max_offset, r3.max_offset = 4096, 4096, 9999  # r3 has "more", but is not in sync
        assert r1.alter([1, 2])["syncStateSet"] == [1, 2]
        eventually(lambda: r2.view["syncStateSet"] == [1, 2] and r2.view["syncStateSetEpoch"] == 2, 5)

        r1.stop_beating()
        masters = watch_master(admin, lambda g: g.master == r2.address, TIMEOUT_MS / 1000 + 5)
        assert r3.address not in masters  # never the replica outside the SyncStateSet
        group = group_of(admin)
        assert group.epoch == 2 and group.sync_state_set == [r2.address]
        eventually(lambda: r2.view["master"] == r2.address and r3.view["masterEpoch"] == 2, 5)  # heard by beating
        roles = {r.address: (r.role, r.in_sync, r.alive) for r in group.replicas}
        assert roles == {
            r1.address: ("slave", False, False),
            r2.address: ("master", True, True),
            r3.address: ("slave", False, True),
        }

        time.sleep(TIMEOUT_MS / 1000 + 1)  # r3 stays out: no election while the master beats
        assert group_of(admin).master == r2.address and group_of(admin).epoch == 2


def test_switchover_goes_only_to_a_live_replica_of_the_sync_state_set(
    make_cluster: Callable[..., LocalCluster], tmp_path: Path
) -> None:
    ns = make_cluster(brokers=0, nameserver_config=controller_config(tmp_path)).nameserver
    with replicas([ns], "g", 3) as (r1, r2, r3), Admin(ns) as admin:
        for r in (r1, r2, r3):
            r.register()
            r.start_beating()
        eventually(lambda: all(r.alive for r in group_of(admin).replicas), 5)
        with pytest.raises(ControllerElectMasterFailedError, match="it is not in the SyncStateSet"):
            admin.switchover("g", to=r3.address)
        with pytest.raises(InvalidParameterError, match=r'replica group "g" has no replica at 127\.0\.0\.1:1;'):
            admin.switchover("g", to="127.0.0.1:1")

        r1.alter([1, 2, 3])
        r2.stop_beating()
        time.sleep(TIMEOUT_MS / 1000 + 0.3)
        with pytest.raises(ControllerBrokerNotAliveError, match=r"replica 2 .* has not heartbeated for 1500 ms"):
            admin.switchover("g", to=r2.address)
        group = admin.switchover("g", to=r3.address)
        assert group.master == r3.address and group.epoch == 2 and group.sync_state_set == [r3.address]
        eventually(lambda: r1.view["masterEpoch"] == 2, 5)
        with pytest.raises(ControllerInvalidMasterError, match="is not the master"):
            r1.alter([1, 2])  # the deposed master
        assert group_of(admin).master == r3.address

        result = cli(ns, "switchover", "g", "--to", r1.address)
        assert result.returncode == 1 and 'error: switchover in "g" to replica 1' in result.stderr
        assert "not in the SyncStateSet" in result.stderr


def test_admin_and_the_cli_show_roles_epochs_offsets_lag_and_the_sync_state_set(
    make_cluster: Callable[..., LocalCluster], tmp_path: Path
) -> None:
    ns = make_cluster(brokers=0, nameserver_config=controller_config(tmp_path)).nameserver
    with replicas([ns], "broker-a", 2) as (r1, r2), Admin(ns) as admin:
        r1.max_offset, r2.max_offset = 10_000, 7_000
        for r in (r1, r2):
            r.register()
            r.start_beating()
        r1.alter([1, 2])
        group = eventually(lambda: (g := group_of(admin, "broker-a")).replicas[1].offset == 7_000 and g, 5)
        assert (group.name, group.cluster, group.master, group.epoch) == ("broker-a", "C1", r1.address, 1)
        assert group.sync_state_set == [r1.address, r2.address]
        master, slave = group.replicas
        assert (master.address, master.role, master.replica_id, master.offset, master.in_sync) == (
            r1.address,
            "master",
            1,
            10_000,
            True,
        )
        assert (slave.role, slave.replica_id, slave.lag, master.lag) == ("slave", 2, 3_000, 0)

        shown = cli(ns, "replicas")
        assert shown.returncode == 0, shown.stderr
        assert "in SyncStateSet" in shown.stdout and "lag" in shown.stdout
        row = next(line for line in shown.stdout.splitlines() if r2.address in line)
        assert all(cell in row for cell in ("broker-a", "slave", "2", "7000", "3000", "yes"))

        switched = cli(ns, "switchover", "broker-a", "--to", r2.address)
        assert switched.returncode == 0, switched.stderr
        assert f"master is now {r2.address} (epoch 2)" in switched.stdout


def test_bad_registrations_and_heartbeats_are_refused_with_what_to_do(
    make_cluster: Callable[..., LocalCluster], tmp_path: Path
) -> None:
    ns = make_cluster(brokers=0, nameserver_config=controller_config(tmp_path)).nameserver
    with replicas([ns], "g", 2) as (r1, r2):
        r1.register()
        r1.start_beating()
        impostor = FakeReplica([ns], "g", 1)  # another process claiming replica id 1
        try:
            with pytest.raises(ControllerReplicaIdInvalidError, match=r"replica id 1 of group \"g\" is held by"):
                impostor.register()
            with pytest.raises(ControllerNeedRegisterError, match="register it"):
                impostor.beat_once(ns)
        finally:
            impostor.close()
        with pytest.raises(ControllerNeedRegisterError, match="is not registered"):
            r2.beat_once(ns)
        r2.register()
        assert r2.beat_once(ns)["master"] == r1.address
        second_id = FakeReplica([ns], "g", 7)
        second_id.address = r2.address  # the same process under another replica id
        try:
            with pytest.raises(ControllerReplicaIdInvalidError, match="cannot register again as replica 7"):
                second_id.register()
        finally:
            second_id.close()


def test_a_nameserver_without_the_controller_says_how_to_enable_it(make_cluster: Callable[..., LocalCluster]) -> None:
    ns = make_cluster(brokers=0).nameserver
    with Admin(ns) as admin, pytest.raises(ControllerNotEnabledError, match="set controller_enable = true"):
        admin.replica_groups()
    with replicas([ns], "g", 1) as (r1,), pytest.raises(ControllerNotEnabledError, match="BROKER_HEARTBEAT"):
        call(r1.client, ns, RequestCode.BROKER_HEARTBEAT, {**r1.header, "maxOffset": 0})
