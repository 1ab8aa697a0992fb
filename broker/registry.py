"""Registration with every configured nameserver: at start, every 30 s, and on each change.

A broker registers its address, permission and full topic table (RocketMQ's
``registerBrokerAll``). Nameservers share nothing, so the broker tells each of them; one
being down never blocks the others. Failures are logged once per nameserver until it is
back, not every period.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import TYPE_CHECKING

from rocketspark.errors import RocketSparkError
from rocketspark.protocol.codec import pack
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.remoting.client import RemotingClient, check

if TYPE_CHECKING:
    from broker.server import Broker

log = logging.getLogger(__name__)


class Registry:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.client = RemotingClient(peer_kind="nameserver", default_timeout_ms=broker.config.register_timeout_ms)
        self._failing: set[str] = set()
        # One lock per nameserver: an UNREGISTER must not be overtaken by a late REGISTER to the
        # same nameserver, while a hung nameserver must not hold back the others.
        self._locks: dict[str, threading.Lock] = {}
        self._stopped = False

    @property
    def nameservers(self) -> list[str]:
        return list(self.broker.config.nameservers)

    def _lock(self, address: str) -> threading.Lock:
        """The nameserver's lock (created on the event loop, before any thread uses it)."""
        return self._locks.setdefault(address, threading.Lock())

    async def run(self) -> None:
        """Re-register every ``register_interval_ms``; start-up registers on its own first."""
        interval = self.broker.config.register_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            await self.register_now()

    async def register_now(self, changed: list[str] | None = None, *, incremental: bool = False) -> None:
        """Register now. ``changed`` names the one topic an admin just changed, so that the
        nameservers notify its subscribers; a full registration (start-up, heartbeat) names
        none and notifies nobody (seed 000's hotspot rule). ``incremental`` sends only the
        changed topics (a topic created or updated, never one deleted): the periodic full
        registration repairs a nameserver that missed one."""
        if not self.broker.role.is_master:
            return  # a slave's group is in the routes through its master (and the controller's view)
        registration = self.broker.registration(changed if incremental and changed else None)
        if changed is not None:
            registration["changed"] = changed
        body = pack(registration)
        await asyncio.gather(
            *(asyncio.to_thread(self._register_one, addr, self._lock(addr), body) for addr in self.nameservers)
        )

    def _register_one(self, address: str, lock: threading.Lock, body: bytes) -> None:
        request = RemotingCommand.request(
            RequestCode.REGISTER_BROKER, {"brokerName": self.broker.name, "clusterName": self.broker.cluster}, body
        )
        try:
            with lock:
                if self._stopped:
                    return
                check(self.client.invoke(address, request))
        except RocketSparkError as exc:
            if address not in self._failing:
                log.warning("broker %s cannot register with nameserver %s: %s", self.broker.name, address, exc)
                self._failing.add(address)
            return
        if address in self._failing:
            log.info("broker %s registered with nameserver %s again", self.broker.name, address)
            self._failing.discard(address)

    async def unregister_all(self) -> None:
        ext = {"brokerName": self.broker.name, "clusterName": self.broker.cluster, "addr": self.broker.address}

        def one(address: str, lock: threading.Lock) -> None:
            with lock:  # after a REGISTER in flight to this nameserver; later ones see _stopped
                try:
                    self.client.invoke(address, RemotingCommand.request(RequestCode.UNREGISTER_BROKER, ext))
                except RocketSparkError:
                    pass  # the nameserver will drop us after the silence timeout anyway

        self._stopped = True
        if not self.broker.role.is_master:
            return  # unregistering the group's name would take its master out of the routes
        await asyncio.gather(*(asyncio.to_thread(one, a, self._lock(a)) for a in self.nameservers))

    def close(self) -> None:
        self.client.close()
