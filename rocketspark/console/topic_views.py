"""The console's topic pages, as JSON-ready dictionaries: the topic list, and one topic's
detail (each queue's offsets and broker with its segments, the route, the config per broker,
the groups that consume it with their lag)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from rocketspark.protocol.types import Perm

if TYPE_CHECKING:
    from rocketspark.client.group_admin import ConsumerProgress
    from rocketspark.client.topic_admin import QueueStatus, TopicInfo
    from rocketspark.console.group_views import GroupListing
    from rocketspark.protocol.types import TopicConfig, TopicRouteData


class TopicReader(Protocol):
    """What the topic pages read (an ``Admin``)."""

    def describe_topics(self) -> list[TopicInfo]: ...

    def topic_route(self, topic: str) -> TopicRouteData: ...

    def topic_status(self, topic: str) -> list[QueueStatus]: ...

    def topic_config(self, topic: str) -> dict[str, TopicConfig]: ...

    @property
    def groups(self) -> GroupListing: ...

    def consumer_progress(self, group: str, topic: str) -> list[ConsumerProgress]: ...


def topics(admin: TopicReader) -> list[dict[str, Any]]:
    return [
        {"name": t.name, "kind": t.kind, "queues": t.queues, "brokers": list(t.brokers)}
        for t in admin.describe_topics()
    ]


def topic(admin: TopicReader, name: str) -> dict[str, Any]:
    """A topic's queues (logical, numbered as Spark's ``queueId``), each with its segments in
    order (RIP-21's picture for a static topic; one segment for a normal one), its route, its
    config on each broker and the groups that committed progress on it."""
    route = admin.topic_route(name)
    return {
        "name": name,
        "static": route.mapping is not None,
        "queues": [_queue(status) for status in admin.topic_status(name)],
        "route": _route(route),
        "config": {broker: _config(c) for broker, c in sorted(admin.topic_config(name).items())},
        "groups": consumers(admin, name),
    }


def _queue(status: QueueStatus) -> dict[str, Any]:
    segments = [
        {
            "broker": s.broker_name,
            "brokerQueueId": s.queue_id,  # the queue on that broker; the topic's id is the queue's
            "gen": s.gen,
            "logicalStart": s.logical_start,
            "logicalEnd": s.logical_end,
            "state": s.state.value,
            "messages": max(0, s.max_offset - s.min_offset),
        }
        for s in status.segments
    ]
    return {
        "queueId": status.queue_id,
        "broker": status.broker_name,
        "minOffset": status.min_offset,
        "maxOffset": status.max_offset,
        "messages": sum(s["messages"] for s in segments) if segments else status.messages,  # a remap's gap is none
        "lastStoreMs": status.last_store_ms,
        "segments": segments,
    }


def _route(route: TopicRouteData) -> list[dict[str, Any]]:
    queues = {q.broker_name: q for q in route.queues}
    rows = []
    for b in sorted(route.brokers, key=lambda b: b.broker_name):
        q = queues.get(b.broker_name)
        rows.append(
            {
                "broker": b.broker_name,
                "cluster": b.cluster,
                "address": b.address,
                "replicas": list(b.replicas),
                "readQueues": q.read_queue_nums if q else 0,
                "writeQueues": q.write_queue_nums if q else 0,
                "perm": Perm.describe(q.perm) if q else "-",
            }
        )
    return rows


def _config(config: TopicConfig) -> dict[str, Any]:
    return {
        "readQueues": config.read_queue_nums,
        "writeQueues": config.write_queue_nums,
        "perm": Perm.describe(config.perm),
        "trace": config.trace,
    }


def consumers(admin: TopicReader, name: str) -> list[dict[str, Any]]:
    """The groups with progress on topic ``name`` and their lag on it (only theirs counted)."""
    topics, members = admin.groups.heard_of()
    rows = []
    for group in sorted(g for g, on in topics.items() if name in on):
        lag = sum(max(0, p.lag) for p in admin.consumer_progress(group, name))
        rows.append({"group": group, "members": len(members.get(group, ())), "lag": lag})
    return rows
