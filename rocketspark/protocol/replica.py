"""Replica groups as the controller reports them (``Admin.replica_groups()``).

Every controller answer about a group (to a heartbeat, a registration, a SyncStateSet change,
a switchover, a query) carries the group's *view* as its msgpack body::

    {"brokerName": "broker-a", "clusterName": "DefaultCluster",
     "master": "127.0.0.1:10911" | None,      # None while the group has no master
     "masterReplicaId": 1 | None,
     "masterEpoch": 2,                        # raised by every election and switchover
     "syncStateSet": [1, 2],                  # replica ids, sorted
     "syncStateSetEpoch": 4,
     "replicas": [{"replicaId": 1, "address": "127.0.0.1:10911",
                   "alive": True,             # heard from within the heartbeat timeout
                   "offset": 1048576,         # commit-log end at its last heartbeat; -1: never heard
                   "epoch": 2,                # the master epoch it last reported; -1: never heard
                   "heartbeatAgeMs": 310}, ...]}   # -1: never heard

Liveness and offsets are as the answering nameserver saw them; the rest is the state its
controller agreed through Raft.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Replica:
    """One replica of a group."""

    address: str
    role: str  # "master" or "slave"
    replica_id: int
    offset: int  # commit-log end at its last heartbeat; -1 if never heard from
    in_sync: bool  # a member of the SyncStateSet
    alive: bool = False  # heard from within the heartbeat timeout
    lag: int | None = None  # bytes behind the master's offset; None without a master or offsets


@dataclass(frozen=True, slots=True)
class ReplicaGroup:
    """A replica group (the brokers sharing a broker name): its master, epoch and SyncStateSet."""

    name: str
    cluster: str
    master: str | None  # address; None while the group has no master
    epoch: int  # the master epoch
    sync_state_set: list[str]  # addresses of the in-sync replicas, master included
    replicas: list[Replica]
    master_replica_id: int | None = None
    sync_state_set_epoch: int = 0

    @classmethod
    def from_wire(cls, view: dict[str, Any]) -> ReplicaGroup:
        in_sync = set(view["syncStateSet"])
        master_id = view["masterReplicaId"]
        rows = view["replicas"]
        master_offset = next((r["offset"] for r in rows if r["replicaId"] == master_id), -1)
        replicas = [
            Replica(
                address=r["address"],
                role="master" if r["replicaId"] == master_id else "slave",
                replica_id=r["replicaId"],
                offset=r["offset"],
                in_sync=r["replicaId"] in in_sync,
                alive=r["alive"],
                lag=max(master_offset - r["offset"], 0) if master_offset >= 0 and r["offset"] >= 0 else None,
            )
            for r in rows
        ]
        return cls(
            name=view["brokerName"],
            cluster=view["clusterName"],
            master=view["master"],
            epoch=view["masterEpoch"],
            sync_state_set=[r.address for r in replicas if r.in_sync],
            replicas=replicas,
            master_replica_id=master_id,
            sync_state_set_epoch=view["syncStateSetEpoch"],
        )
