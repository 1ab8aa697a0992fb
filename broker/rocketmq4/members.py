"""The RocketMQ 4.x clients of a broker: their connections, producer groups and consumer groups
with each group's subscriptions, as their heartbeats tell them (RocketMQ's ``ClientManageProcessor``).

Group membership itself is the broker's one table (``broker.consumers``), which our own group
consumers are in too; this adds what only 4.x clients have: the subscription a pull without one
is filtered by, and the connection the broker pushes to (NOTIFY_CONSUMER_IDS_CHANGED when a
group's members change, so Java and Go clients rebalance at once; CHECK_TRANSACTION_STATE to a
producer of a half message). A client whose connection closes leaves its groups at once.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Protocol

from rocketspark.errors import InvalidParameterError
from rocketspark.protocol.codes import Flag
from rocketspark.protocol.command import RemotingCommand
from rocketspark.remoting import frame
from rocketspark.remoting.server import Channel
from rocketspark.rocketmq4.codes import Code

log = logging.getLogger(__name__)

TAG: str = "TAG"
SQL92: str = "SQL92"


@dataclass(frozen=True, slots=True)
class Subscription:
    """What a consumer group reads of a topic: every message, some tags, or an SQL92 filter."""

    topic: str
    expression_type: str = TAG
    expression: str = "*"

    @property
    def tags(self) -> list[str] | None:
        """The tags a TAG subscription wants (None: all)."""
        if self.expression_type != TAG:
            return None
        wanted = [t.strip() for t in self.expression.split("||") if t.strip()]
        return None if not wanted or "*" in wanted else wanted

    @classmethod
    def of(cls, topic: str, expression: str | None, expression_type: str | None) -> Subscription:
        kind = (expression_type or TAG).upper()
        if kind not in (TAG, SQL92):
            raise InvalidParameterError(
                f'subscription to {topic}: expression type "{expression_type}" is not TAG or SQL92'
            )
        return cls(topic, kind, (expression or "*").strip() or "*")


@dataclass(slots=True)
class Client:
    client_id: str
    channel: Channel
    consumer_groups: set[str] = field(default_factory=set)
    producer_groups: set[str] = field(default_factory=set)


class GroupMembers(Protocol):
    """The broker's consumer groups (``broker.consumers.ConsumerGroups``), as a 4.x client's
    departure changes them."""

    def unregister(self, group: str, client_id: str) -> None: ...

    def members(self, group: str) -> list[str]: ...


class Members:
    """4.x clients by id. A client gone with its connection leaves its consumer groups at once
    (``groups``), and their other members are told."""

    def __init__(self, groups: GroupMembers) -> None:
        self.groups = groups
        self.clients: dict[str, Client] = {}
        self.subscriptions: dict[tuple[str, str], Subscription] = {}  # (group, topic) -> newest heard

    def heartbeat(
        self, client_id: str, channel: Channel | None, consumers: dict[str, list[Subscription]], producers: set[str]
    ) -> None:
        client = self.clients.get(client_id)
        if channel is not None and (client is None or client.channel is not channel):
            client = Client(client_id, channel)
            self.clients[client_id] = client
            channel.on_close(lambda: self._closed(client_id, channel))
        if client is not None:
            client.consumer_groups |= set(consumers)
            client.producer_groups |= producers
        for group, subscriptions in consumers.items():
            for subscription in subscriptions:
                self.subscriptions[(group, subscription.topic)] = subscription

    def subscription(self, group: str, topic: str) -> Subscription | None:
        return self.subscriptions.get((group, topic))

    def unregister(self, client_id: str, consumer_group: str | None, producer_group: str | None) -> None:
        client = self.clients.get(client_id)
        if client is None:
            return
        if consumer_group:
            client.consumer_groups.discard(consumer_group)
        if producer_group:
            client.producer_groups.discard(producer_group)

    def notify_changed(self, group: str, members: list[str]) -> int:
        """Tell the group's 4.x members its membership changed (oneway, as RocketMQ's broker
        does); how many were told."""
        told = 0
        for client_id in members:
            client = self.clients.get(client_id)
            if client is not None and group in client.consumer_groups:
                command = RemotingCommand.request(Code.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": group})
                command.serialize = frame.JSON
                command.flag |= Flag.ONEWAY
                told += client.channel.push(command)
        return told

    def producers_of(self, group: str) -> list[Client]:
        return [c for c in self.clients.values() if group in c.producer_groups]

    def _closed(self, client_id: str, channel: Channel) -> None:
        client = self.clients.get(client_id)
        if client is None or client.channel is not channel:
            return  # it came back on a newer connection
        del self.clients[client_id]
        for group in client.consumer_groups:
            try:
                self.groups.unregister(group, client_id)
                self.notify_changed(group, self.groups.members(group))
            except Exception:
                log.exception("a 4.x client's departure from group %s was not handled", group)
