"""Who is connected: a consumer group's clients with their subscriptions, a producer group's
clients, every producer group (``mqadmin consumerConnection`` / ``producerConnection``; the
RocketMQ Dashboard's "consumer client" and "producer connection" views).

Each broker knows the clients that heartbeat to it (:mod:`broker.connections`): our own,
RocketMQ 4.x clients, and the RocketMQ 5 clients of its v2 endpoint. The answers of every
broker are merged by client id: its ``brokers`` are those that know it, ``last_seen_ms`` the
latest any of them heard from it, and what it said of itself (address, language, version,
subscriptions) is taken from the broker that heard it last. A broker that does not answer is
left out (the others still show their clients); a group nobody is in has no connections,
which is not an error.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from rocketspark.client.admin_core import ClientCore
from rocketspark.errors import ConnectError, RequestTimeoutError
from rocketspark.protocol.bodies import unpack
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.connections import Subscribed

__all__ = ["ClientConnection", "Connections", "Subscribed"]


@dataclass(frozen=True, slots=True)
class ClientConnection:
    client_id: str
    address: str  # the client's host:port as its broker sees it
    language: str  # "PYTHON", "JAVA", "NODE", "GO", ...
    version: str
    protocol: str  # "rocketspark" | "remoting" | "grpc"
    brokers: tuple[str, ...]  # names of the brokers that know it in this group
    last_seen_ms: int  # epoch ms, the latest any of those brokers heard from it
    subscriptions: tuple[Subscribed, ...] = ()  # consumer groups only

    def to_json(self) -> dict[str, Any]:
        """As ``--json`` prints it and the console reads it."""
        return {
            "clientId": self.client_id,
            "address": self.address,
            "language": self.language,
            "version": self.version,
            "protocol": self.protocol,
            "brokers": list(self.brokers),
            "lastSeenMs": self.last_seen_ms,
            "subscriptions": [s.wire() for s in self.subscriptions],
        }


def _by_topic(subscribed: Subscribed) -> str:
    return subscribed.topic


def merged(seen: list[tuple[str, Mapping[str, Any]]]) -> list[ClientConnection]:
    """(broker name, a broker's entry) pairs as one connection per client id, sorted by id (its
    subscriptions by topic)."""
    latest: dict[str, Mapping[str, Any]] = {}
    brokers: dict[str, set[str]] = {}
    for broker, entry in seen:
        client_id = str(entry["clientId"])
        brokers.setdefault(client_id, set()).add(broker)
        if client_id not in latest or int(entry["lastSeenMs"]) > int(latest[client_id]["lastSeenMs"]):
            latest[client_id] = entry
    return [
        ClientConnection(
            client_id,
            str(entry["address"]),
            str(entry["language"]),
            str(entry["version"]),
            str(entry["protocol"]),
            tuple(sorted(brokers[client_id])),
            int(entry["lastSeenMs"]),
            tuple(sorted((Subscribed.from_wire(s) for s in entry.get("subscriptions") or ()), key=_by_topic)),
        )
        for client_id, entry in sorted(latest.items())
    ]


class Connections:
    """The connection views over an admin connection (``Admin.consumer_connections`` and kin)."""

    def __init__(self, core: ClientCore) -> None:
        self.core = core

    def _answers(self, code: int, ext: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
        """Each broker's answer (its unpacked body), by broker name; one that cannot be reached
        is skipped (a refusal, such as a missing permission, is raised)."""
        for name, address in sorted(self.core.brokers().items()):
            if not address:
                continue  # a replica group with no master now
            try:
                response = self.core.call(address, RemotingCommand.request(code, ext))
            except (ConnectError, RequestTimeoutError):
                continue
            yield name, unpack(response.body)

    def consumers(self, group: str) -> list[ClientConnection]:
        """The consumer group's clients, with what each subscribes to."""
        answers = self._answers(RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": group})
        return merged([(broker, entry) for broker, body in answers for entry in body["connections"]])

    def producers(self, group: str) -> list[ClientConnection]:
        answers = self._answers(RequestCode.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": group})
        return merged([(broker, entry) for broker, body in answers for entry in body["connections"]])

    def producer_groups(self) -> dict[str, list[ClientConnection]]:
        """Every producer group some broker knows, by name, with its clients."""
        seen: dict[str, list[tuple[str, Mapping[str, Any]]]] = {}
        for broker, body in self._answers(RequestCode.GET_ALL_PRODUCER_INFO, {}):
            for group, entries in body["groups"].items():
                seen.setdefault(str(group), []).extend((broker, entry) for entry in entries)
        return {group: merged(seen[group]) for group in sorted(seen)}
