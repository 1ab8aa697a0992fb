"""Replica groups as the controller keeps them, and a planned switchover (mqadmin's
getSyncStateSet, getControllerMetaData and electMaster).

Every nameserver runs a controller and answers as it saw the brokers' heartbeats;
``controller_metadata`` describes one of them (the first nameserver, unless an address is
given). On its own::

    from rocketspark.client.admin_core import AdminConnection
    from rocketspark.client.replica_admin import Replicas

    with AdminConnection("127.0.0.1:9876") as connection:
        replicas = Replicas(connection)
        group = replicas.group("broker-a")
        replicas.switchover("broker-a", group.replicas[1].address)
"""

from __future__ import annotations

from typing import Any

from rocketspark.client.admin_core import AdminCore
from rocketspark.errors import InvalidParameterError
from rocketspark.protocol.bodies import unpack
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.replica import ReplicaGroup


class Replicas:
    """The controller's replica groups: masters, epochs, SyncStateSets."""

    def __init__(self, core: AdminCore) -> None:
        self.core = core

    def groups(self) -> dict[str, ReplicaGroup]:
        """Every replica group the controller knows: master, epoch, SyncStateSet, and each
        replica's role, last reported offset and lag (as one nameserver saw the heartbeats)."""
        request = RemotingCommand.request(RequestCode.CONTROLLER_GET_SYNC_STATE_DATA)
        groups: dict[str, Any] = unpack(self.core.nameserver_call(request).body)["groups"]
        return {name: ReplicaGroup.from_wire(view) for name, view in groups.items()}

    def group(self, group: str) -> ReplicaGroup:
        request = RemotingCommand.request(RequestCode.CONTROLLER_GET_REPLICA_INFO, {"brokerName": group})
        return ReplicaGroup.from_wire(unpack(self.core.nameserver_call(request).body))

    def switchover(self, group: str, to: str) -> ReplicaGroup:
        """Hand ``group`` over to its replica at address ``to`` (planned; it must be alive and in
        the SyncStateSet). Returns the group as the controller left it: ``to`` is master, at a
        new epoch."""
        current = self.group(group)
        target = next((r for r in current.replicas if r.address == to), None)
        if target is None:
            raise InvalidParameterError(
                f'replica group "{group}" has no replica at {to}; its replicas: '
                f"{', '.join(f'{r.address} ({r.role})' for r in current.replicas) or 'none'}"
            )
        ext = {"brokerName": group, "replicaId": target.replica_id}
        response = self.core.nameserver_call(RemotingCommand.request(RequestCode.CONTROLLER_ELECT_MASTER, ext))
        return ReplicaGroup.from_wire(unpack(response.body))

    def controller_metadata(self, address: str | None = None) -> dict[str, Any]:
        """One nameserver's controller as it sees itself (mqadmin ``getControllerMetaData``):
        ``controllerLeaderAddress`` (the Raft leader it last heard), ``isLeader``, ``self``,
        ``peers``, ``term`` and ``hasQuorum``."""
        request = RemotingCommand.request(RequestCode.CONTROLLER_GET_METADATA_INFO)
        metadata: dict[str, Any] = unpack(self.core.nameserver_call_at(address, request).body)
        return metadata
