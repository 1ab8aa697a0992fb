"""The endpoint's RocketMQ 5 clients as the broker's connection registry lists them (what
``admin consumer-connection`` and ``admin producer-connection`` show).

A client is named by its ``x-mq-client-id``; its language and version come from its
``x-mq-language`` and ``x-mq-client-version`` headers (else the ``user_agent`` of its
settings), its address from the gRPC peer. Its ``Settings`` on ``Telemetry`` say what it is: a
producer is listed under each topic it publishes to (RocketMQ 5's proxy registers a gRPC
producer with the topic as its group), a simple or push consumer under its group with its
subscriptions. Its heartbeats keep it listed; it leaves when it says it terminates, or when it
has gone quiet for the broker's consumer expiry.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, Protocol

from rocketspark.grpcv2.stubs import definition_pb2 as pb
from rocketspark.protocol.connections import GRPC, SQL92, TAG, Subscribed

LANGUAGE_HEADER: Final = "x-mq-language"
VERSION_HEADER: Final = "x-mq-client-version"
# v2's Language names where RocketMQ's LanguageCode (what 4.x clients and operators see) differs
_LANGUAGES: Final = {"GOLANG": "GO", "NODE_JS": "NODE", "DOT_NET": "DOTNET"}


class Registry(Protocol):
    """The broker's connection registry (``broker.connections.Connections``), as fed from here."""

    def heard(
        self,
        client_id: str,
        *,
        address: str,
        language: str,
        version: str,
        protocol: str,
        consumers: Mapping[str, Sequence[Subscribed]] | None = None,
        producers: Iterable[str] = (),
    ) -> object: ...
    def touch(self, client_id: str) -> bool: ...
    def gone(self, client_id: str) -> None: ...


def peer_address(peer: str) -> str:
    """gRPC's "ipv4:127.0.0.1:5555" (or "ipv6:[::1]:5555") as host:port."""
    kind, _, rest = peer.partition(":")
    return rest if kind in ("ipv4", "ipv6") and rest else peer


def _language(name: str) -> str:
    name = name.upper()
    return _LANGUAGES.get(name, name)


def _subscriptions(settings: pb.Settings) -> list[Subscribed]:
    out = []
    for entry in settings.subscription.subscriptions:
        kind = SQL92 if entry.expression.type == pb.FilterType.SQL else TAG
        out.append(Subscribed(entry.topic.name, kind, entry.expression.expression or "*"))
    return out


def noted(
    registry: Registry, client_id: str, metadata: Mapping[str, Any], peer: str, settings: pb.Settings | None
) -> None:
    """A client's settings (or, with ``settings`` None, a heartbeat of one not known here)."""
    if not client_id:
        return
    agent = settings.user_agent if settings is not None else pb.UA()
    language = str(metadata.get(LANGUAGE_HEADER) or (pb.Language.Name(agent.language) if agent.language else ""))
    consumers: dict[str, list[Subscribed]] = {}
    producers: list[str] = []
    if settings is not None and settings.HasField("publishing"):
        producers = [t.name for t in settings.publishing.topics]
    elif settings is not None and settings.HasField("subscription") and settings.subscription.group.name:
        consumers[settings.subscription.group.name] = _subscriptions(settings)
    registry.heard(
        client_id,
        address=peer_address(peer),
        language=_language(language),
        version=str(metadata.get(VERSION_HEADER) or agent.version),
        protocol=GRPC,
        consumers=consumers,
        producers=producers,
    )


def heartbeat(registry: Registry, client_id: str, metadata: Mapping[str, Any], peer: str, group: str) -> None:
    """A heartbeat: a sign of life, or (a client this broker forgot, as after its restart) a
    new entry with the group it names (its subscriptions come with its next settings)."""
    if not client_id or registry.touch(client_id):
        return
    noted(registry, client_id, metadata, peer, None)
    if group:
        registry.heard(client_id, address="", language="", version="", protocol=GRPC, consumers={group: ()})
