"""A replica's link to the controller that runs inside the nameservers.

At start the replica registers with the controller (any nameserver: Raft forwards it), then
heartbeats every nameserver every ``controller_heartbeat_interval_ms`` with its log end and
the master epoch it knows. Each answer carries the group as the controller sees it; the
newest (highest master epoch) of the answers is what the replica acts on: it takes office,
follows another master, or stays as it is, and a master's lease is renewed (see
:mod:`broker.ha.role`). A master also asks the controller to change the SyncStateSet when
its slaves catch up or fall behind (:mod:`broker.ha.acks`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from broker.ha.replication import Replication
from broker.ha.role import GroupView, Role
from rocketspark.errors import ControllerNeedRegisterError, RocketSparkError
from rocketspark.protocol.bodies import unpack
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.remoting.client import RemotingClient, check
from rocketspark.security.settings import PeerSecurity

log = logging.getLogger(__name__)


def parse_view(body: bytes) -> GroupView:
    view: dict[str, Any] = unpack(body)
    return GroupView(
        master=view["master"],
        master_replica_id=view["masterReplicaId"],
        master_epoch=int(view["masterEpoch"]),
        sync_state_set=frozenset(int(i) for i in view["syncStateSet"]),
        sync_state_set_epoch=int(view["syncStateSetEpoch"]),
        replicas={int(r["replicaId"]): str(r["address"]) for r in view["replicas"]},
    )


class ControllerLink:
    def __init__(
        self,
        role: Role,
        replication: Replication,
        *,
        cluster: str,
        address: Callable[[], str],
        nameservers: list[str],
        interval_ms: int,
        on_role_change: Callable[[], object],
        security: PeerSecurity | None = None,
    ) -> None:
        self.role = role
        self.replication = replication
        self.cluster = cluster
        self.address = address
        self.nameservers = nameservers
        self.interval_s = interval_ms / 1000
        self.on_role_change = on_role_change
        self.client = RemotingClient(
            peer_kind="nameserver",
            default_timeout_ms=max(1000, 2 * interval_ms),
            credentials=security.credentials if security is not None else None,
            tls=security.client_tls if security is not None else None,
        )
        self.registered = False
        self._fresh = True  # until a registration succeeds: this process has just started
        self._failing = False

    def _ext(self) -> dict[str, Any]:
        return {"brokerName": self.role.group, "clusterName": self.cluster, "replicaId": self.role.replica_id}

    def _state(self) -> dict[str, Any]:
        """Where this replica is: its address, log end and the newest epoch its log holds."""
        epoch = max(self.role.epoch, self.replication.epochs.last_epoch)
        return {"address": self.address(), "maxOffset": self.replication.store.log_max_offset, "masterEpoch": epoch}

    async def _call(self, nameserver: str, code: int, ext: dict[str, Any]) -> GroupView:
        request = RemotingCommand.request(code, {**self._ext(), **ext})
        return parse_view(check(await self.client.invoke_await(nameserver, request)).body)

    async def register(self) -> None:
        """Join the group (idempotent); the first replica a group ever has becomes its master."""
        last: Exception | None = None
        ext = {**self._state(), "fresh": self._fresh}  # fresh from a master: it restarted, a new epoch follows
        for nameserver in self.nameservers:
            sent = time.monotonic()
            try:
                view = await self._call(nameserver, RequestCode.CONTROLLER_REGISTER_BROKER, ext)
            except RocketSparkError as exc:
                last = exc
                continue
            self.registered = True
            self._fresh = False
            self._learn(view, sent)
            return
        raise last or RocketSparkError("no nameserver is configured for the controller")

    async def beat(self) -> None:
        """One round: heartbeat every nameserver, act on the newest view, tend the SyncStateSet."""
        if not self.registered:
            await self.register()
        ext = {**self._state(), "masterUnreachable": self.replication.master_unreachable}
        sent = time.monotonic()
        answers = await asyncio.gather(
            *(self._call(ns, RequestCode.BROKER_HEARTBEAT, ext) for ns in self.nameservers), return_exceptions=True
        )
        views = [a for a in answers if isinstance(a, GroupView)]
        if any(isinstance(a, ControllerNeedRegisterError) for a in answers):
            self.registered = False
        if not views:
            raise next((a for a in answers if isinstance(a, Exception)), RocketSparkError("no answer"))
        self._learn(max(views, key=lambda v: (v.master_epoch, v.sync_state_set_epoch)), sent)
        await self._tend_sync_state_set()

    async def _tend_sync_state_set(self) -> None:
        wanted = self.replication.sync_state_set_wanted()
        view = self.role.view
        if wanted is None or view is None:
            return
        ext = {
            "masterReplicaId": self.role.replica_id,
            "masterEpoch": view.master_epoch,
            "syncStateSet": sorted(wanted),
            "syncStateSetEpoch": view.sync_state_set_epoch,
        }
        for nameserver in self.nameservers:
            sent = time.monotonic()
            try:
                new = await self._call(nameserver, RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET, ext)
            except RocketSparkError as exc:
                log.info("group %s: SyncStateSet change to %s not made: %s", self.role.group, sorted(wanted), exc)
                continue
            log.info("group %s: SyncStateSet is now %s", self.role.group, sorted(new.sync_state_set))
            self._learn(new, sent)
            return

    def _learn(self, view: GroupView, sent: float) -> None:
        was = (self.role.is_master, self.role.epoch)
        self.role.learn(view, sent)
        self.replication.role_changed()
        if (self.role.is_master, self.role.epoch) != was:
            self.on_role_change()

    async def run(self) -> None:
        """Heartbeat until cancelled; a failing round is logged once until one succeeds."""
        while True:
            try:
                await self.beat()
                if self._failing:
                    log.info("replica %d of %s reaches the controller again", self.role.replica_id, self.role.group)
                    self._failing = False
            except RocketSparkError as exc:
                if not self._failing:
                    log.warning(
                        "replica %d of %s cannot reach the controller: %s", self.role.replica_id, self.role.group, exc
                    )
                    self._failing = True
            await asyncio.sleep(self.interval_s)

    def close(self) -> None:
        self.client.close()
