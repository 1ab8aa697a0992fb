"""The controller's requests and its election scan, on one nameserver.

Reads (heartbeats, replica info) answer from this node's copy of the replicated state and
its own liveness table; changes (registration, SyncStateSet, switchover, elections) go
through Raft from whichever node received them. Every answer about a group carries the
group's view (``view``), so a broker learns its role from the answer to its heartbeat.

Only the node that leads Raft runs the election scan (every ``SCAN_INTERVAL_MS``), as only
RocketMQ's active controller does; the others keep their liveness tables current, ready to
take over.
"""

from __future__ import annotations

import logging
from typing import Any

from nameserver.config import NameServerConfig
from nameserver.controller.election import after_restart, elections
from nameserver.controller.liveness import Liveness
from nameserver.controller.raft import RaftNode
from nameserver.controller.state import GroupState
from rocketspark.errors import (
    ControllerBrokerNotAliveError,
    ControllerGroupNotExistError,
    ControllerInvalidReplicasError,
    ControllerNeedRegisterError,
    ControllerNotEnabledError,
    RocketSparkError,
)
from rocketspark.protocol.bodies import pack
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.headers import get_bool, get_int, get_list, get_str
from rocketspark.remoting.server import Dispatcher, Handler

log = logging.getLogger("nameserver.controller")

SCAN_INTERVAL_MS = 200
STALLED_S = 1.0  # a scan this late means this node itself stalled: it judges nobody this round
CODES = (
    RequestCode.BROKER_HEARTBEAT,
    RequestCode.CONTROLLER_REGISTER_BROKER,
    RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET,
    RequestCode.CONTROLLER_ELECT_MASTER,
    RequestCode.CONTROLLER_GET_REPLICA_INFO,
    RequestCode.CONTROLLER_GET_METADATA_INFO,
    RequestCode.CONTROLLER_GET_SYNC_STATE_DATA,
)


def register_disabled(dispatcher: Dispatcher) -> None:
    """Answer every controller request with why there is no controller here."""

    async def disabled(cmd: RemotingCommand) -> RemotingCommand:
        raise ControllerNotEnabledError(
            f"the controller is not enabled on this nameserver; set controller_enable = true (with "
            f"controller_raft_address and controller_peers) in its config to serve {RequestCode(cmd.code).name}"
        )

    for code in CODES:
        dispatcher.register(code, disabled)


class Controller:
    def __init__(self, config: NameServerConfig) -> None:
        self.config = config
        self.raft = RaftNode(
            config.controller_raft_address,
            config.controller_peers,
            config.controller_data_dir,
            password=config.cluster_secret or None,  # required with peers (config): Raft is authenticated
        )
        self.liveness = Liveness(config.controller_broker_heartbeat_timeout_ms)
        self.leading = False
        self.elections = 0  # new masters (or none) this node installed as leader
        self._last_scan = self.liveness.clock()

    def register(self, dispatcher: Dispatcher) -> None:
        handlers: dict[RequestCode, Handler] = {
            RequestCode.BROKER_HEARTBEAT: self.heartbeat,
            RequestCode.CONTROLLER_REGISTER_BROKER: self.register_broker,
            RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET: self.alter_sync_state_set,
            RequestCode.CONTROLLER_ELECT_MASTER: self.switchover,
            RequestCode.CONTROLLER_GET_REPLICA_INFO: self.replica_info,
            RequestCode.CONTROLLER_GET_METADATA_INFO: self.metadata,
            RequestCode.CONTROLLER_GET_SYNC_STATE_DATA: self.sync_state_data,
        }
        for code in CODES:
            dispatcher.register(code, handlers[code])

    async def start(self) -> None:
        await self.raft.start()

    async def stop(self) -> None:
        await self.raft.stop()

    # -- views ---------------------------------------------------------------------------------

    def view(self, group: GroupState) -> dict[str, Any]:
        """The group as every controller answer carries it (see ``rocketspark.protocol.replica``)."""
        now = self.liveness.clock()
        replicas = []
        for replica_id, address in group.replicas.items():
            beat = self.liveness.beat(group.name, replica_id, address)
            replicas.append(
                {
                    "replicaId": replica_id,
                    "address": address,
                    "alive": self.liveness.alive(group.name, replica_id, address),
                    "offset": -1 if beat is None else beat.max_offset,
                    "epoch": -1 if beat is None else beat.master_epoch,
                    "heartbeatAgeMs": -1 if beat is None else int((now - beat.seen) * 1000),
                }
            )
        return {
            "brokerName": group.name,
            "clusterName": group.cluster,
            "master": group.master_address,
            "masterReplicaId": group.master_id,
            "masterEpoch": group.master_epoch,
            "syncStateSet": sorted(group.sync_state_set),
            "syncStateSetEpoch": group.sync_state_set_epoch,
            "replicas": replicas,
        }

    def views(self) -> list[dict[str, Any]]:
        """Every replica group as ``view`` shows it (the metrics' SyncStateSets and lags)."""
        return [self.view(group) for group in self.raft.snapshot().values()]

    def addresses(self, name: str) -> tuple[str, tuple[str, ...]] | None:
        """Where a replica group is, for routes: its master ("" while it has none) and its
        live slaves; None for a broker that is no replica group."""
        group = self.raft.group(name)
        if group is None:
            return None
        slaves = tuple(
            address
            for replica_id, address in sorted(group.replicas.items())
            if replica_id != group.master_id and self.liveness.alive(group.name, replica_id, address)
        )
        return group.master_address or "", slaves

    def masters(self) -> dict[str, tuple[str | None, int]]:
        """Every group's master and master epoch, to notice a change of master."""
        return {name: (g.master_address, g.master_epoch) for name, g in self.raft.snapshot().items()}

    def _answer(self, cmd: RemotingCommand, group: GroupState) -> RemotingCommand:
        return cmd.response(body=pack(self.view(group)))

    def _group(self, name: str) -> GroupState:
        group = self.raft.group(name)
        if group is None:
            raise ControllerGroupNotExistError(
                f'the controller at {self.raft.address} knows no replica group "{name}"; its brokers register '
                "(CONTROLLER_REGISTER_BROKER) when they start"
            )
        return group

    # -- handlers ------------------------------------------------------------------------------

    async def heartbeat(self, cmd: RemotingCommand) -> RemotingCommand:
        name, replica_id, address = get_str(cmd, "brokerName"), get_int(cmd, "replicaId"), get_str(cmd, "address")
        group = self.raft.group(name)
        if group is None or group.replicas.get(replica_id) != address:
            raise ControllerNeedRegisterError(
                f'replica {replica_id} at {address} is not registered in group "{name}" with the controller at '
                f"{self.raft.address}; register it (CONTROLLER_REGISTER_BROKER), then heartbeat"
            )
        self.liveness.record(
            name,
            replica_id,
            address,
            get_int(cmd, "maxOffset", 0),
            get_int(cmd, "masterEpoch", -1),
            master_unreachable=get_bool(cmd, "masterUnreachable", False),
        )
        return self._answer(cmd, group)

    async def register_broker(self, cmd: RemotingCommand) -> RemotingCommand:
        """A replica joins its group. A ``fresh`` registration is a process's first: if it
        comes from the group's master, the master restarted, and the group is given a master
        of a new epoch at once (``election.after_restart``), whoever that is."""
        name, replica_id, address = get_str(cmd, "brokerName"), get_int(cmd, "replicaId"), get_str(cmd, "address")
        known = self.raft.group(name)
        holder = None if known is None else known.replicas.get(replica_id)
        silent = holder if holder not in (None, address) and self.liveness.lapsed(name, replica_id, holder) else None
        group = await self.raft.propose(
            "register_replica", name, get_str(cmd, "clusterName"), replica_id, address, silent
        )
        if silent is not None:
            log.warning("group %s: replica %d moved from %s (silent) to %s", name, replica_id, silent, address)
        restarted = known is not None and known.master_id == replica_id and known.master_epoch == group.master_epoch
        if restarted and get_bool(cmd, "fresh", False):
            offset, epoch = get_int(cmd, "maxOffset", 0), get_int(cmd, "masterEpoch", -1)
            self.liveness.record(name, replica_id, address, offset, epoch)
            chosen = after_restart(group, self.liveness, replica_id, offset, epoch)
            group = await self.raft.propose("elect_master", name, chosen, group.master_epoch)
            self.elections += 1
            log.warning(
                "group %s: master %s restarted; %s is master at epoch %d",
                name,
                address,
                group.master_address,
                group.master_epoch,
            )
        return self._answer(cmd, group)

    async def alter_sync_state_set(self, cmd: RemotingCommand) -> RemotingCommand:
        group = await self.raft.propose(
            "alter_sync_state_set",
            get_str(cmd, "brokerName"),
            get_int(cmd, "masterReplicaId"),
            get_int(cmd, "masterEpoch"),
            [int(r) for r in get_list(cmd, "syncStateSet")],
            get_int(cmd, "syncStateSetEpoch", -1),
        )
        return self._answer(cmd, group)

    async def switchover(self, cmd: RemotingCommand) -> RemotingCommand:
        """A planned election of a named replica (RocketMQ's ELECT_MASTER with a designated
        broker): it must be registered, alive and in the SyncStateSet."""
        group = self._group(get_str(cmd, "brokerName"))
        target = get_int(cmd, "replicaId")
        address = group.replicas.get(target)
        if address is None:
            raise ControllerInvalidReplicasError(
                f'switchover of "{group.name}": it has no replica {target} (replicas: '
                f"{', '.join(f'{r} {a}' for r, a in group.replicas.items())})"
            )
        if not self.liveness.alive(group.name, target, address):
            raise ControllerBrokerNotAliveError(
                f'switchover of "{group.name}" to {group.describe(target)} refused: it has not heartbeated for '
                f"{self.config.controller_broker_heartbeat_timeout_ms} ms (as the controller at {self.raft.address} "
                "sees it). Hand over to a live replica"
            )
        group = await self.raft.propose("switchover", group.name, target, group.master_epoch)
        log.warning("group %s: switched over to %s at epoch %d", group.name, group.master_address, group.master_epoch)
        return self._answer(cmd, group)

    async def replica_info(self, cmd: RemotingCommand) -> RemotingCommand:
        return self._answer(cmd, self._group(get_str(cmd, "brokerName")))

    async def sync_state_data(self, cmd: RemotingCommand) -> RemotingCommand:
        """Every group's view, or the named groups' (unknown names are left out, as RocketMQ)."""
        groups = self.raft.snapshot()
        names = get_list(cmd, "brokerNames", None)
        chosen = sorted(groups) if names is None else [str(n) for n in names if n in groups]
        return cmd.response(body=pack({"groups": {name: self.view(groups[name]) for name in chosen}}))

    async def metadata(self, cmd: RemotingCommand) -> RemotingCommand:
        status = self.raft.status()
        return cmd.response(
            body=pack(
                {
                    "controllerLeaderAddress": self.raft.leader(),
                    "isLeader": self.raft.is_leader(),
                    "self": self.raft.address,
                    "peers": self.raft.peers,
                    "term": int(status.get("raft_term", 0)),
                    "hasQuorum": bool(status.get("has_quorum", False)),
                }
            )
        )

    # -- the election scan ---------------------------------------------------------------------

    async def scan(self) -> None:
        """On the Raft leader: replace lapsed masters from their SyncStateSets.

        A scan that runs long after the last one shows this nameserver was stalled (paused,
        starved of CPU): the heartbeats it did not read in that time say nothing of the
        brokers, so it grants them a fresh timeout instead of deposing every master at once."""
        now = self.liveness.clock()
        stalled = now - self._last_scan > STALLED_S
        self._last_scan = now
        leading = self.raft.is_leader()
        if leading and not self.leading:
            self.liveness.grant_grace()  # its table may be stale: judge no one dead for a timeout
            log.info("controller %s leads Raft now; elections start after a grace period", self.raft.address)
        elif leading and stalled:
            self.liveness.grant_grace()
            log.warning("controller %s was stalled; it judges no broker dead for one timeout", self.raft.address)
        self.leading = leading
        if not leading:
            return
        for decided in elections(self.raft.snapshot().values(), self.liveness):
            try:
                group = await self.raft.propose(
                    "elect_master", decided.group, decided.candidate, decided.expected_master_epoch
                )
            except RocketSparkError as exc:
                log.warning("group %s: election not applied: %s", decided.group, exc.message)
                continue
            self.elections += 1
            log.warning(
                "group %s: new master %s at epoch %d (the master was silent for %d ms, or there was none)",
                group.name,
                group.master_address or "none: no live replica in the SyncStateSet",
                group.master_epoch,
                self.config.controller_broker_heartbeat_timeout_ms,
            )
