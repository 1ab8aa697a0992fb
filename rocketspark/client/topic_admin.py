"""Normal topics for the operator: list, create, delete, describe, and each queue's status
(mqadmin's topicList, updateTopic, deleteTopic, topicRoute and topicStatus).

A change goes to every broker concerned and then to every nameserver, and each broker
registers the change with the nameservers before it answers, so a route query right after
``create`` already sees the new topic. On its own::

    from rocketspark.client.admin_core import AdminConnection
    from rocketspark.client.topic_admin import Topics

    with AdminConnection("127.0.0.1:9876") as connection:
        topics = Topics(connection)
        topics.create("orders", 8)
        print(topics(), [q.max_offset for q in topics.status("orders")])
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from rocketspark.client.admin_core import Caller, QueueCore
from rocketspark.client.logical import LogicalQueue, logical_view
from rocketspark.client.topic_stats import TopicStats, fetch_topic_stats, queue_bounds, segment_state, segment_stats
from rocketspark.errors import BrokerNotExistError, RocketSparkError, TopicNotExistError
from rocketspark.protocol.bodies import unpack
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.static_mapping import SegmentState
from rocketspark.protocol.types import Perm, TopicConfig, TopicRouteData
from rocketspark.protocol.validation import topic_kind, validate_topic_name

DEFAULT_QUEUES: Final = 8  # a new topic's queues per broker, a static topic's logical queues


@dataclass(frozen=True, slots=True)
class SegmentStatus:
    """One segment of a logical queue: where it lives, its logical range and its state."""

    broker_name: str
    queue_id: int  # physical queue id on the broker
    gen: int
    logical_start: int
    logical_end: int | None  # None while open
    state: SegmentState
    min_offset: int  # physical offsets on the broker
    max_offset: int


@dataclass(frozen=True, slots=True)
class QueueStatus:
    """One logical queue of a topic as ``status`` reports it (a normal topic's queues are
    logical queues of one segment each)."""

    queue_id: int  # logical queue id (what Consumer.pull takes)
    min_offset: int  # logical
    max_offset: int  # logical, one past the newest message
    last_store_ms: int  # store time of the newest message, 0 if empty
    segments: tuple[SegmentStatus, ...] = ()

    @property
    def broker_name(self) -> str:
        """The broker of the newest segment (the one taking writes)."""
        return self.segments[-1].broker_name if self.segments else ""

    @property
    def messages(self) -> int:
        return self.max_offset - self.min_offset


@dataclass(frozen=True, slots=True)
class TopicInfo:
    """A topic as ``admin topics`` shows it (mqadmin topicList)."""

    name: str
    kind: str  # "normal", "static" or "system"
    queues: int  # logical queues
    brokers: tuple[str, ...]


def _queue_status(queue: LogicalQueue, stats: TopicStats) -> QueueStatus:
    segments = []
    for segment in queue.segments:
        row = segment_stats(segment, stats)
        segments.append(
            SegmentStatus(
                segment.broker_name,
                segment.queue_id,
                segment.gen,
                segment.logic_offset,
                segment.logical_end,
                segment_state(segment, row),
                row.min_offset,
                row.max_offset,
            )
        )
    low, high = queue_bounds(queue, stats)
    last_store = max((segment_stats(s, stats).last_store_ms for s in queue.segments), default=0)
    return QueueStatus(queue.queue_id, low, high, last_store, tuple(segments))


def broker_topic_config(core: Caller, address: str, topic: str) -> dict[str, Any] | None:
    """A broker's config of the topic, with its mapping detail if static (GET_TOPIC_CONFIG's
    answer: ``config``, ``mapping``); None if it has none."""
    try:
        response = core.call(address, RemotingCommand.request(RequestCode.GET_TOPIC_CONFIG, {"topic": topic}))
    except TopicNotExistError:
        return None
    body: dict[str, Any] = unpack(response.body)
    return body


class Topics:
    """The cluster's topics. Called, it lists their names (``topics()``)."""

    def __init__(self, core: QueueCore) -> None:
        self.core = core

    def __call__(self) -> list[str]:
        """Every topic the nameserver has a route for."""
        request = RemotingCommand.request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        names: list[str] = unpack(self.core.nameserver_call(request).body)
        return names

    def create(
        self,
        topic: str,
        queues: int = DEFAULT_QUEUES,
        *,
        brokers: list[str] | None = None,
        cluster: str | None = None,
        read_queues: int | None = None,
        perm: int = Perm.READ_WRITE,
        trace: bool = False,
    ) -> list[str]:
        """Create or update a normal topic on the given brokers (default: every broker, or every
        broker of ``cluster``); ``trace``: its brokers record each message's life
        (``Admin.message_trace``). Returns the brokers it was created on."""
        validate_topic_name(topic)
        known = self.core.brokers(cluster)
        targets = list(brokers) if brokers else sorted(known)
        missing = [b for b in targets if b not in known]
        if missing:
            raise BrokerNotExistError(
                f"broker(s) {', '.join(missing)} not registered; known brokers: {', '.join(sorted(known)) or 'none'}"
            )
        if not targets:
            raise BrokerNotExistError("no broker is registered with the nameserver; start a broker first")
        ext = {"topic": topic, "writeQueueNums": queues, "readQueueNums": read_queues or queues, "perm": perm}
        if trace:
            ext["trace"] = True
        for name in targets:
            self.core.call(known[name], RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, ext))
        self.core.forget_route(topic)
        return targets

    def delete(self, topic: str) -> list[str]:
        """Delete a topic from every broker that has it, then from every nameserver."""
        try:
            route = self.core.topic_route(topic)
        except TopicNotExistError:
            raise TopicNotExistError(
                f'topic "{topic}" exists on no broker and no nameserver: nothing was deleted (check its name: '
                "`rocketspark admin route <topic>` shows where a topic is)"
            ) from None
        names = [b.broker_name for b in route.brokers]
        brokers = self.core.brokers()
        for name in names:
            if name in brokers:
                request = RemotingCommand.request(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": topic})
                self.core.call(brokers[name], request)
        self.core.each_nameserver(RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": topic})
        self.core.forget_route(topic)
        return names

    def route(self, topic: str) -> TopicRouteData:
        """The route as the nameserver has it now (not from the cache)."""
        return self.core.topic_route(topic)

    def status(self, topic: str) -> list[QueueStatus]:
        """Per logical queue: min/max offset, newest store time, and each segment's broker,
        physical queue, logical range and state (Normal, ReadOnly, Expired)."""
        route = self.core.topic_route(topic)
        stats = fetch_topic_stats(self.core, route)
        return [_queue_status(queue, stats) for queue in logical_view(route)]

    def describe(self) -> list[TopicInfo]:
        """Every topic the nameservers know, with its kind (normal, static, system), logical
        queues and brokers, sorted by name."""
        out = []
        for name in sorted(self()):
            try:
                route = self.core.topic_route(name)
            except RocketSparkError:  # deleted between the list and its route
                continue
            out.append(
                TopicInfo(
                    name,
                    topic_kind(name, route.mapping is not None),
                    len(self.core.queues(name)),
                    tuple(sorted({q.broker_name for q in route.queues})),
                )
            )
        return out

    def config(self, topic: str) -> dict[str, TopicConfig]:
        """The topic's config as each registered broker that has it holds it (queue counts,
        permission, trace flag), by broker name; TopicNotExistError when none has it."""
        validate_topic_name(topic)
        found = {}
        for name, address in sorted(self.core.brokers().items()):
            body = broker_topic_config(self.core, address, topic) if address else None
            if body is not None:
                found[name] = TopicConfig.from_wire(body["config"])
        if not found:
            raise TopicNotExistError(
                f'topic "{topic}" exists on no registered broker (`rocketspark admin topics` lists the topics)'
            )
        return found
