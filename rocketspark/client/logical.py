"""The logical view of a topic: every topic as logical queues made of segments.

A static topic's route carries its mapping: each logical queue is a chain of segments
(physical queues, possibly on different brokers). A normal topic looks the same with one
open segment per queue: its queues in broker-name order, each starting at logical offset 0.
Readers (the consumer, the Spark connector) therefore handle both kinds with one code path.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from rocketspark.client.routes import read_queues
from rocketspark.errors import ConnectError, RocketSparkError
from rocketspark.protocol.static_mapping import LogicQueueMappingItem, find_item, next_item
from rocketspark.protocol.types import TopicRouteData


@dataclass(frozen=True, slots=True)
class Segment:
    """One physical queue of a logical queue: its mapping item, which carries RocketMQ's
    offset formulas, and the address of its broker."""

    item: LogicQueueMappingItem
    address: str | None  # None when the broker is not in the route right now

    @property
    def broker_name(self) -> str:
        return self.item.bname

    @property
    def queue_id(self) -> int:
        """Physical queue id on the broker."""
        return self.item.queue_id

    @property
    def gen(self) -> int:
        return self.item.gen

    @property
    def logic_offset(self) -> int:
        return self.item.logic_offset

    @property
    def start_offset(self) -> int:
        return self.item.start_offset

    @property
    def end_offset(self) -> int:
        """Physical end, exclusive; -1 while open."""
        return self.item.end_offset

    @property
    def sealed(self) -> bool:
        return self.item.sealed

    @property
    def offset_delta(self) -> int:
        return self.item.offset_delta

    @property
    def logical_end(self) -> int | None:
        return self.item.logical_end

    def physical(self, logical: int) -> int:
        return self.item.physical(logical)

    def logical(self, physical: int) -> int:
        return self.item.logical(physical)

    def require_address(self, topic: str) -> str:
        """The broker's address; a broker missing from the route is reported the same way
        wherever it is needed (ConnectError: it may be down, a fresh route may have it back)."""
        if self.address is None:
            raise ConnectError(
                f"broker {self.broker_name}, which holds {topic} from logical offset {self.logic_offset}, is not "
                "registered with the nameserver; is it down?"
            )
        return self.address


@dataclass(frozen=True, slots=True)
class LogicalQueue:
    topic: str
    queue_id: int  # logical queue id: what Consumer.pull and the Spark partitions use
    segments: tuple[Segment, ...]  # oldest first; the last one is open unless a remap is under way
    epoch: int
    static: bool
    items: list[LogicQueueMappingItem] = field(init=False, repr=False, compare=False)  # the segments' items

    def __post_init__(self) -> None:
        object.__setattr__(self, "items", [s.item for s in self.segments])

    @property
    def leader(self) -> Segment | None:
        if self.segments and not self.segments[-1].sealed:
            return self.segments[-1]
        return None

    def _segment_of(self, item: LogicQueueMappingItem) -> Segment:
        return self.segments[self.items.index(item)]

    def segment_for(self, logical: int) -> Segment:
        """The last segment starting at or before ``logical``, else the first one."""
        return self._segment_of(find_item(self.items, logical))

    def next_after(self, segment: Segment) -> Segment | None:
        following = next_item(self.items, segment.item)
        return self._segment_of(following) if following is not None else None

    def after_end(self, segment: Segment) -> int:
        """Where reading continues once a sealed segment is exhausted."""
        following = self.next_after(segment)
        if following is not None:
            return following.logic_offset
        end = segment.logical_end
        return end if end is not None else segment.logic_offset


def logical_view(route: TopicRouteData) -> list[LogicalQueue]:
    """The topic's logical queues, static or not."""
    if route.mapping is not None:
        mapping = route.mapping
        return [
            LogicalQueue(
                route.topic,
                logical_id,
                tuple(Segment(item, route.read_address_of(item.bname)) for item in mapping.items(logical_id)),
                mapping.epoch,
                True,
            )
            for logical_id in range(mapping.total_queues)
        ]
    return [
        LogicalQueue(
            route.topic,
            index,
            (_whole_queue(route, ref.broker_name, ref.queue_id),),
            0,
            False,
        )
        for index, ref in enumerate(read_queues(route))
    ]


def topic_queue_ids(queues: list[LogicalQueue]) -> dict[tuple[str, int], int]:
    """(broker name, queue id as that broker's messages and send results carry it) -> the
    topic's queue id: the numbering of ``Consumer.queues``, Spark's ``queueId`` and ``admin
    progress`` (a normal topic's queues across its brokers in broker-name order). A static
    topic's brokers carry its logical ids already: they map to themselves, on every broker of
    the queue's segments. A broker not in the view (down, or not readable) has no entry."""
    if any(q.static for q in queues):
        return {(s.broker_name, q.queue_id): q.queue_id for q in queues for s in q.segments}
    return {(q.segments[0].broker_name, q.segments[0].queue_id): q.queue_id for q in queues if q.segments}


class QueueSource(Protocol):
    """What has a topic's logical queues (a ``Consumer``, an ``Admin``)."""

    def queues(self, topic: str) -> list[LogicalQueue]: ...


def queue_numbering(source: QueueSource, topic: str) -> dict[tuple[str, int], int]:
    """:func:`topic_queue_ids` of ``topic`` as ``source`` sees it now; empty for a topic gone
    since (a message or result of it then has no number to show)."""
    try:
        return topic_queue_ids(source.queues(topic))
    except RocketSparkError:
        return {}


def physical_queue(route: TopicRouteData, broker_name: str, queue_id: int) -> LogicalQueue:
    """One broker's physical queue seen as a queue of its own (explicit addressing)."""
    return LogicalQueue(route.topic, queue_id, (_whole_queue(route, broker_name, queue_id),), 0, False)


def _whole_queue(route: TopicRouteData, broker_name: str, queue_id: int) -> Segment:
    """A normal topic's queue as the one open segment of a logical queue, from offset 0."""
    item = LogicQueueMappingItem(gen=0, queue_id=queue_id, bname=broker_name, logic_offset=0)
    return Segment(item, route.read_address_of(broker_name))


@dataclass(frozen=True, slots=True)
class SegmentRange:
    """A physical slice ``[start, end)`` of one segment of a logical queue.

    It carries the queue and segment as planned (they travel to the executor inside the
    partition), so a replay reads the same slice from the same segment whatever the route
    says by then."""

    queue: LogicalQueue
    segment: Segment
    start: int  # physical, inclusive
    end: int  # physical, exclusive

    @property
    def count(self) -> int:
        return self.end - self.start

    @property
    def offset_delta(self) -> int:
        """Logical minus physical offset in this segment."""
        return self.segment.offset_delta

    @property
    def logical_start(self) -> int:
        return self.start + self.offset_delta

    @property
    def logical_end(self) -> int:
        return self.end + self.offset_delta


def plan_ranges(queue: LogicalQueue, start: int, end: int) -> list[SegmentRange]:
    """The segment slices holding logical ``[start, end)``, gaps skipped."""
    out = []
    for segment in queue.segments:
        low = max(start, segment.logic_offset)
        high = end if segment.logical_end is None else min(end, segment.logical_end)
        if low < high:
            out.append(SegmentRange(queue, segment, segment.physical(low), segment.physical(high)))
    return out


def count(queue: LogicalQueue, start: int, end: int) -> int:
    """Messages (offsets actually in segments) in logical ``[start, end)``."""
    return sum(r.count for r in plan_ranges(queue, start, end))


def advance(queue: LogicalQueue, start: int, end: int, n: int) -> int:
    """The logical offset after taking ``n`` messages from ``start`` (at most up to ``end``)."""
    if n <= 0:
        return start
    for r in plan_ranges(queue, start, end):
        if n < r.count:
            return r.logical_start + n
        n -= r.count
    return end
