"""Who is connected to this broker: each client's address, language, version and groups, for
operators (RocketMQ's ``consumerConnection`` / ``producerConnection``, the Dashboard's
"consumer client" and "producer connection" views).

One entry per client id, whatever it speaks: our own clients (protocol ``rocketspark``: a
group consumer's or a producer's HEART_BEAT), RocketMQ 4.x clients (``remoting``: their JSON
HEART_BEAT with consumer and producer groups) and RocketMQ 5 clients of this broker's v2
endpoint (``grpc``: their settings and heartbeats; a v5 producer is listed under each topic it
publishes to, as RocketMQ 5's proxy registers it with the topic as its group). An entry leaves
when its connection closes (where the transport says so), when the client unregisters, or when
it has not been heard from for ``consumer_expired_ms`` (as ``broker.consumers`` drops a member).

This is what operators see; it drives nothing. Group membership for rebalancing stays in
``broker.consumers``. Only heartbeats and settings feed it. On the send path it costs one
dictionary look-up: message trace asks a traced send's client (``sender``: by the client id a
translated send names, else by its connection), and a 4.x send names its client id by it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Final, Protocol

from rocketspark.protocol.connections import GRPC, OURS, REMOTING, Subscribed

__all__ = ["GRPC", "OURS", "REMOTING", "Connection", "Connections", "Subscribed", "version_name"]

V4_BASE: Final = 212  # MQVersion ordinal of V4_0_0_SNAPSHOT; from there each x.y.z has a SNAPSHOT and a release


class Closing(Protocol):
    """A connection as the registry watches it: it says when it closes."""

    def on_close(self, callback: Callable[[], None]) -> None: ...


@dataclass(slots=True)
class Connection:
    client_id: str
    address: str
    language: str
    version: str
    protocol: str
    version_code: int = 0  # a 4.x client's header version (MQVersion ordinal), as mqadmin reads it; else 0
    heard_ms: int = 0  # epoch ms, for operators
    heard_at: float = 0.0  # monotonic, for expiry
    consumer_groups: dict[str, tuple[Subscribed, ...]] = field(default_factory=dict)
    producer_groups: set[str] = field(default_factory=set)
    channel: Closing | None = None

    def wire(self, group: str | None = None) -> dict[str, Any]:
        """As a broker answers it; with the subscriptions of consumer ``group`` if given."""
        subscriptions = self.consumer_groups.get(group, ()) if group is not None else ()
        return {
            "clientId": self.client_id,
            "address": self.address,
            "language": self.language,
            "version": self.version,
            "protocol": self.protocol,
            "lastSeenMs": self.heard_ms,
            "subscriptions": [s.wire() for s in subscriptions],
        }


def version_name(ordinal: int) -> str:
    """A 4.x client's header version (RocketMQ's ``MQVersion`` ordinal) as RocketMQ names it,
    "V4_9_4". Past the first sixteen, the table is regular: each version a SNAPSHOT and a
    release, 3.0.1-3.0.15, then 3.1.0-3.2.9, 3.3.1-3.9.9 (no x.y.0), and from 4.0.0 every x.y.z."""
    if ordinal < 0:
        return str(ordinal)
    if ordinal < len(_V3_0_0_ALL):
        return f"V3_0_0_{_V3_0_0_ALL[ordinal]}"
    for base, first_minor, first_patch, patches in _V_RUNS:
        if ordinal >= base:
            step, release = divmod(ordinal - base, 2)
            major, minor = divmod(first_minor + step // patches, 10)
            name = f"V{3 + major}_{minor}_{first_patch + step % patches}"
            return name if release else f"{name}_SNAPSHOT"
    return str(ordinal)


_V3_0_0_ALL: Final = (
    *("SNAPSHOT", "ALPHA1", *(f"BETA{i}" for i in range(1, 6))),
    *(f"BETA{i}{s}" for i in range(6, 10) for s in ("_SNAPSHOT", "")),
    "FINAL",
)  # ordinals 0-15: V3_0_0_SNAPSHOT ... V3_0_0_FINAL
# (first ordinal, its minor counted from 3.0, its first patch, patches per minor), latest first
_V_RUNS: Final = ((V4_BASE, 10, 0, 10), (86, 3, 1, 9), (46, 1, 0, 10), (16, 0, 1, 15))


class Connections:
    """The broker's clients by id (on the broker's event loop)."""

    def __init__(self, expired_ms: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.expired_s = expired_ms / 1000
        self.clock = clock
        self.clients: dict[str, Connection] = {}
        self.by_channel: dict[int, str] = {}  # id(connection) -> the client id last heard on it

    def heard(
        self,
        client_id: str,
        *,
        address: str,
        language: str,
        version: str,
        protocol: str,
        channel: Closing | None = None,
        consumers: Mapping[str, Sequence[Subscribed]] | None = None,
        producers: Iterable[str] = (),
        version_code: int = 0,
    ) -> Connection:
        """A heartbeat (or settings) of ``client_id``: what it says it is, and its groups."""
        entry = self.clients.get(client_id)
        if entry is None:
            entry = self.clients[client_id] = Connection(client_id, address, language, version, protocol)
        entry.address = address or entry.address
        entry.language, entry.version, entry.protocol = language or entry.language, version or entry.version, protocol
        entry.version_code = version_code or entry.version_code
        if channel is not None and entry.channel is not channel:
            entry.channel = channel
            self.by_channel[id(channel)] = client_id
            channel.on_close(partial(self._closed, client_id, channel))
        for group, subscriptions in (consumers or {}).items():
            entry.consumer_groups[group] = tuple(subscriptions)
        entry.producer_groups.update(producers)
        self.touch(client_id)
        return entry

    def touch(self, client_id: str) -> bool:
        """A sign of life of ``client_id`` (a v2 heartbeat); False if it is not known here."""
        entry = self.clients.get(client_id)
        if entry is None:
            return False
        entry.heard_at, entry.heard_ms = self.clock(), int(time.time() * 1000)
        return True

    def leave(self, client_id: str, consumer_group: str | None = None, producer_group: str | None = None) -> None:
        """The client left a group (UNREGISTER_CLIENT); with none left, it is gone."""
        entry = self.clients.get(client_id)
        if entry is None:
            return
        if consumer_group:
            entry.consumer_groups.pop(consumer_group, None)
        if producer_group:
            entry.producer_groups.discard(producer_group)
        if not entry.consumer_groups and not entry.producer_groups:
            del self.clients[client_id]

    def gone(self, client_id: str) -> None:
        """The client ended (a v2 client's termination)."""
        self.clients.pop(client_id, None)

    def sender(self, channel: object | None, client_id: str = "") -> Connection | None:
        """The client a send came from, if known here: the one ``client_id`` names (a send the
        v2 endpoint or the 4.x dialect translated), else the one heard on ``channel``."""
        if client_id:
            return self.clients.get(client_id)
        if channel is None:
            return None
        entry = self.clients.get(self.by_channel.get(id(channel), ""))
        return entry if entry is not None and entry.channel is channel else None  # not a reused id

    def _closed(self, client_id: str, channel: Closing) -> None:
        self.by_channel.pop(id(channel), None)
        entry = self.clients.get(client_id)
        if entry is not None and entry.channel is channel:
            del self.clients[client_id]  # not if it came back on a newer connection

    def live(self) -> list[Connection]:
        """The clients heard from within ``consumer_expired_ms``; the others are dropped."""
        cutoff = self.clock() - self.expired_s
        for client_id in [c for c, e in self.clients.items() if e.heard_at < cutoff]:
            del self.clients[client_id]
        return sorted(self.clients.values(), key=lambda e: e.client_id)

    def consumers(self, group: str) -> list[Connection]:
        return [e for e in self.live() if group in e.consumer_groups]

    def producers(self, group: str) -> list[Connection]:
        return [e for e in self.live() if group in e.producer_groups]

    def consumers_of(self, group: str) -> list[dict[str, Any]]:
        return [e.wire(group) for e in self.consumers(group)]

    def producers_of(self, group: str) -> list[dict[str, Any]]:
        return [e.wire() for e in self.producers(group)]

    def producer_groups(self) -> dict[str, list[dict[str, Any]]]:
        """Every producer group with its clients, by group name."""
        groups: dict[str, list[dict[str, Any]]] = {}
        for entry in self.live():
            for group in entry.producer_groups:
                groups.setdefault(group, []).append(entry.wire())
        return dict(sorted(groups.items()))
