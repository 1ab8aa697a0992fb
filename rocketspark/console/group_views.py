"""The console's group pages, as JSON-ready dictionaries: consumer groups with their lag, one
group's members (client id, address, language, version, protocol, subscriptions), per-queue
lag on each topic and its retry and DLQ topics; the producers' connections per group; and
every %RETRY% and %DLQ% topic with its message count."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from rocketspark.client.group_admin import ConsumerProgress, GroupInfo


class Connection(Protocol):
    """A client connection as ``Admin.consumer_connections`` and ``producer_connections`` give
    it (``ClientConnection``), in the JSON ``admin ... --json`` prints too."""

    def to_json(self) -> dict[str, Any]: ...


class GroupTopic(Protocol):
    """A group's retry or DLQ topic as ``Admin.group_topics`` gives it."""

    @property
    def topic(self) -> str: ...

    @property
    def group(self) -> str: ...

    @property
    def kind(self) -> str: ...

    @property
    def messages(self) -> int: ...


class GroupListing(Protocol):
    """``Admin.groups``: called, every group with its lag; ``heard_of``, without the lag."""

    def __call__(self) -> list[GroupInfo]: ...

    def heard_of(self) -> tuple[dict[str, set[str]], dict[str, set[str]]]: ...


class GroupReader(Protocol):
    """What the group pages read (an ``Admin``)."""

    @property
    def groups(self) -> GroupListing: ...

    def consumer_progress(self, group: str, topic: str) -> list[ConsumerProgress]: ...

    def consumer_connections(self, group: str) -> Sequence[Connection]: ...

    def producer_groups(self) -> Mapping[str, Sequence[Connection]]: ...

    def group_topics(self) -> Sequence[GroupTopic]: ...


def groups(admin: GroupReader) -> list[dict[str, Any]]:
    return [
        {"group": g.group, "topics": list(g.topics), "members": list(g.members), "lag": g.lag} for g in admin.groups()
    ]


def group_topic(t: GroupTopic) -> dict[str, Any]:
    return {"topic": t.topic, "group": t.group, "kind": t.kind, "messages": t.messages}


def group(admin: GroupReader, name: str) -> dict[str, Any]:
    """One consumer group: its members, its lag per queue on each topic it has progress on or
    subscribes to (retry and DLQ topics apart), and its retry and DLQ topics with their counts."""
    members = [c.to_json() for c in admin.consumer_connections(name)]
    topics = set(admin.groups.heard_of()[0].get(name, ()))
    topics.update(s["topic"] for m in members for s in m["subscriptions"])
    own = [group_topic(t) for t in admin.group_topics() if t.group == name]
    special = {t["topic"] for t in own}
    progress = []
    for topic in sorted(topics - special):
        rows = admin.consumer_progress(name, topic)
        queues = [
            {
                "queueId": p.queue_id,
                "broker": p.broker_name,
                "brokerOffset": p.broker_offset,
                "consumerOffset": p.consumer_offset,
                "lag": p.lag,
            }
            for p in rows
        ]
        progress.append({"topic": topic, "lag": sum(max(0, p.lag) for p in rows), "queues": queues})
    return {"group": name, "members": members, "progress": progress, "groupTopics": own}


def producers(admin: GroupReader) -> list[dict[str, Any]]:
    """Every producer group with its connections."""
    return [
        {"group": name, "connections": [c.to_json() for c in conns]}
        for name, conns in sorted(admin.producer_groups().items())
    ]


def dlq(admin: GroupReader) -> list[dict[str, Any]]:
    """Every %RETRY% and %DLQ% topic with its group and message count."""
    return [group_topic(t) for t in sorted(admin.group_topics(), key=lambda t: (t.group, t.kind, t.topic))]
