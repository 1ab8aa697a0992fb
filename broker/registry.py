"""Registration with every configured nameserver: at start, every 30 s, and on each change.

A broker registers its address, permission and full topic table (RocketMQ's
``registerBrokerAll``). Nameservers share nothing, so the broker tells each of them; one
being down never blocks the others. Failures are logged once per nameserver until it is
back, not every period.

Between registrations, every ``nameserver_heartbeat_interval_ms`` (1 s) the broker asks each
nameserver whether it holds its registration at its current version (RocketMQ's
QUERY_DATA_VERSION, a few bytes) and registers again at once with one that does not: a
restarted nameserver, or one that missed a change, is repaired within a second, not at the
next 30 s registration (until then a restarted nameserver answers "not ready", see
``nameserver.readiness``).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from typing import Any

from broker.config import BrokerConfig
from broker.ha.role import Role
from rocketspark.errors import RocketSparkError
from rocketspark.protocol.bodies import pack
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.remoting.client import RemotingClient, check
from rocketspark.remoting.transport import Transport
from rocketspark.security.service import VERSION_FIELD, reconcile
from rocketspark.security.settings import PeerSecurity
from rocketspark.security.store import AclStore

log = logging.getLogger(__name__)


Registration = Callable[[list[str] | None], dict[str, Any]]  # what to tell: all topics, or these


class Registry:
    """``registration(None)`` gives a full registration, ``registration(topics)`` an
    increment, ``version()`` the version a registration would carry; ``address()`` is this
    broker's address once it is bound. ``transport`` carries
    the calls to the nameservers: by default a client of the registry's own (closed with it);
    a test hands in a scripted nameserver."""

    def __init__(
        self,
        config: BrokerConfig,
        role: Role,
        registration: Registration,
        address: Callable[[], str],
        security: PeerSecurity,
        acl: AclStore,
        *,
        version: Callable[[], int],
        transport: Transport | None = None,
    ) -> None:
        self.config = config
        self.registration_version = version  # the "version" of ``registration``, without building one
        self.name = config.broker_name
        self.role = role
        self.registration = registration
        self.acl = acl
        self.address = address
        self._own_client: RemotingClient | None = None  # closed by close(); a transport handed in is not ours
        if transport is None:
            transport = self._own_client = RemotingClient(
                peer_kind="nameserver",
                default_timeout_ms=config.register_timeout_ms,
                credentials=security.credentials,
                tls=security.client_tls,
            )
        self.client: Transport = transport
        self._tasks: set[asyncio.Task[None]] = set()  # registrations that outlive their caller
        self._failing: set[str] = set()
        # One lock per nameserver: an UNREGISTER must not be overtaken by a late REGISTER to the
        # same nameserver, while a hung nameserver must not hold back the others.
        self._locks: dict[str, threading.Lock] = {}
        self._stopped = False

    @property
    def nameservers(self) -> list[str]:
        return list(self.config.nameservers)

    def _lock(self, address: str) -> threading.Lock:
        """The nameserver's lock (created on the event loop, before any thread uses it)."""
        return self._locks.setdefault(address, threading.Lock())

    async def run(self) -> None:
        """Re-register every ``register_interval_ms``; start-up registers on its own first."""
        interval = self.config.register_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            await self.register_now()

    async def watch(self) -> None:
        """Every ``nameserver_heartbeat_interval_ms``: register again with each nameserver that
        lacks this broker's current registration."""
        interval = self.config.nameserver_heartbeat_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            await self.check_now()

    async def check_now(self) -> None:
        if not self.role.is_master or self._stopped:
            return
        ext = {
            "brokerName": self.name,
            "clusterName": self.config.cluster_name,
            "addr": self.address(),
            "version": self.registration_version(),
        }
        lacking = await asyncio.gather(
            *(asyncio.to_thread(self._lacks, addr, self._lock(addr), ext) for addr in self.nameservers)
        )
        stale = [addr for addr, lacks in zip(self.nameservers, lacking, strict=True) if lacks]
        if stale:
            body = pack(self.registration(None))
            await asyncio.gather(*(asyncio.to_thread(self._register_one, a, self._lock(a), body) for a in stale))

    def _lacks(self, address: str, lock: threading.Lock, ext: dict[str, object]) -> bool:
        """Whether the nameserver lacks this broker's registration (False when it cannot be
        asked: the 30 s registration and its failure log cover an unreachable one)."""
        request = RemotingCommand.request(RequestCode.QUERY_DATA_VERSION, ext)
        try:
            with lock:
                return bool(check(self.client.invoke(address, request)).ext.get("changed", True))
        except RocketSparkError as exc:
            log.debug("broker %s: data version check with nameserver %s failed: %s", self.name, address, exc)
            return False

    async def register_now(self, changed: list[str] | None = None, *, incremental: bool = False) -> None:
        """Register now. ``changed`` names the one topic an admin just changed, so that the
        nameservers notify its subscribers; a full registration (start-up, heartbeat) names
        none and notifies nobody (seed 000's hotspot rule). ``incremental`` sends only the
        changed topics (a topic created or updated, never one deleted): the periodic full
        registration repairs a nameserver that missed one."""
        if not self.role.is_master:
            return  # a slave's group is in the routes through its master (and the controller's view)
        registration = self.registration(changed if incremental and changed else None)
        if changed is not None:
            registration["changed"] = changed
        body = pack(registration)
        await asyncio.gather(
            *(asyncio.to_thread(self._register_one, addr, self._lock(addr), body) for addr in self.nameservers)
        )

    def register_soon(self, changed: list[str] | None = None, *, incremental: bool = False) -> asyncio.Task[None]:
        """``register_now`` as a task of its own, kept until it is done: it finishes even when
        whoever started it does not wait, or is cancelled."""
        task = asyncio.get_running_loop().create_task(self.register_now(changed, incremental=incremental))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def register_shielded(self, changed: list[str]) -> None:
        """An incremental registration of ``changed`` that finishes even when the caller is
        cancelled (a send that auto-created a topic and then timed out)."""
        await asyncio.shield(self.register_soon(changed, incremental=True))

    def _register_one(self, address: str, lock: threading.Lock, body: bytes) -> None:
        ext: dict[str, object] = {"brokerName": self.name, "clusterName": self.config.cluster_name}
        if self.config.auth_enable:
            ext[VERSION_FIELD] = self.acl.table.version  # the nameserver answers with its own
        request = RemotingCommand.request(RequestCode.REGISTER_BROKER, ext, body)
        try:
            with lock:
                if self._stopped:
                    return
                response = check(self.client.invoke(address, request))
        except RocketSparkError as exc:
            if address not in self._failing:
                log.warning("broker %s cannot register with nameserver %s: %s", self.name, address, exc)
                self._failing.add(address)
            return
        if address in self._failing:
            log.info("broker %s registered with nameserver %s again", self.name, address)
            self._failing.discard(address)
        theirs = response.ext.get(VERSION_FIELD)  # absent from a nameserver with security off
        if self.config.auth_enable and isinstance(theirs, int):
            self._catch_up(address, theirs)

    def _catch_up(self, address: str, theirs: int) -> None:
        """Whichever of this broker and the nameserver missed a user change takes the other's
        table; a failure is retried at the next registration."""
        try:
            reconcile(self._call, address, self.acl, theirs)
        except RocketSparkError as exc:
            log.warning(
                "broker %s: user table version %d here, %d at nameserver %s; catching up failed (retried at the next "
                "registration): %s",
                self.name,
                self.acl.table.version,
                theirs,
                address,
                exc,
            )

    def _call(self, address: str, request: RemotingCommand) -> RemotingCommand:
        return check(self.client.invoke(address, request))

    async def unregister_all(self) -> None:
        ext = {"brokerName": self.name, "clusterName": self.config.cluster_name, "addr": self.address()}

        def one(address: str, lock: threading.Lock) -> None:
            with lock:  # after a REGISTER in flight to this nameserver; later ones see _stopped
                try:
                    self.client.invoke(address, RemotingCommand.request(RequestCode.UNREGISTER_BROKER, ext))
                except RocketSparkError:
                    pass  # the nameserver will drop us after the silence timeout anyway

        self._stopped = True
        if not self.role.is_master:
            return  # unregistering the group's name would take its master out of the routes
        await asyncio.gather(*(asyncio.to_thread(one, a, self._lock(a)) for a in self.nameservers))

    def close(self) -> None:
        if self._own_client is not None:
            self._own_client.close()
