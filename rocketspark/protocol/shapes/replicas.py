"""Shapes of the replica groups' requests: a slave's HA questions to its master, and the
replicas' requests to the nameserver's controller."""

from __future__ import annotations

from typing import Annotated, Final

from msgspec import Meta

from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.shapes.declared import RequestShape
from rocketspark.protocol.shapes.fields import (
    MAX_REPLICAS,
    MAX_TOPICS_PER_REQUEST,
    Address,
    BrokerHeader,
    Name,
    NoFields,
    Offset,
    OffsetOrNone,
    ReplicaId,
    Shape,
)


class HaEpochsHeader(Shape):
    master_epoch: Offset


class ReplicaHeader(Shape):
    """A replica of a group, as it registers with the controller (and heartbeats)."""

    broker_name: Name
    cluster_name: Name
    replica_id: ReplicaId
    address: Address
    max_offset: Offset = 0  # the replica's commit-log end
    master_epoch: OffsetOrNone = -1  # the master epoch it believes in
    fresh: bool = False  # a registration: the process's first (it has just started)


class BrokerHeartbeatHeader(ReplicaHeader):
    """BROKER_HEARTBEAT: a replica's log end and epoch, every controller_heartbeat_interval_ms."""

    master_unreachable: bool = False  # a slave whose master's port refuses connections


class AlterSyncStateSetHeader(Shape):
    broker_name: Name
    master_replica_id: ReplicaId
    master_epoch: Offset
    sync_state_set: Annotated[list[ReplicaId], Meta(min_length=1, max_length=MAX_REPLICAS)]
    sync_state_set_epoch: OffsetOrNone = -1  # -1: not checked


class ElectMasterHeader(Shape):
    broker_name: Name
    replica_id: ReplicaId  # the replica to hand the group over to


class GroupNamesHeader(Shape):
    broker_names: Annotated[list[Name], Meta(max_length=MAX_TOPICS_PER_REQUEST)] | None = None  # none: all


_C = RequestCode
SHAPES: Final[dict[int, RequestShape]] = {
    # broker: a slave asks its master
    _C.HA_GET_EPOCHS: RequestShape(HaEpochsHeader),
    _C.HA_GET_METADATA: RequestShape(NoFields),
    # nameserver: the replica-group controller
    _C.BROKER_HEARTBEAT: RequestShape(BrokerHeartbeatHeader),
    _C.CONTROLLER_REGISTER_BROKER: RequestShape(ReplicaHeader),
    _C.CONTROLLER_ALTER_SYNC_STATE_SET: RequestShape(AlterSyncStateSetHeader),
    _C.CONTROLLER_ELECT_MASTER: RequestShape(ElectMasterHeader),
    _C.CONTROLLER_GET_REPLICA_INFO: RequestShape(BrokerHeader),
    _C.CONTROLLER_GET_METADATA_INFO: RequestShape(NoFields),
    _C.CONTROLLER_GET_SYNC_STATE_DATA: RequestShape(GroupNamesHeader),
}
