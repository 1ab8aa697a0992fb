"""The logical view of a topic: every topic as logical queues made of segments.

A static topic's route carries its mapping: each logical queue is a chain of segments
(physical queues, possibly on different brokers). A normal topic looks the same with one
open segment per queue: its queues in broker-name order, each starting at logical offset 0.
Readers (the consumer, the Spark connector) therefore handle both kinds with one code path.
"""

from __future__ import annotations

from dataclasses import dataclass

from rocketspark.client.routes import read_queues
from rocketspark.protocol.mapping import LogicQueueMappingItem
from rocketspark.protocol.types import TopicRouteData


@dataclass(frozen=True, slots=True)
class Segment:
    """One physical queue of a logical queue, with RocketMQ's offset formulas."""

    broker_name: str
    address: str | None  # None when the broker is not in the route right now
    queue_id: int  # physical queue id on the broker
    gen: int
    logic_offset: int
    start_offset: int = 0
    end_offset: int = -1  # physical end, exclusive; -1 while open

    @classmethod
    def of(cls, item: LogicQueueMappingItem, address: str | None) -> Segment:
        return cls(item.bname, address, item.queue_id, item.gen, item.logic_offset, item.start_offset, item.end_offset)

    @property
    def sealed(self) -> bool:
        return self.end_offset >= 0

    @property
    def offset_delta(self) -> int:
        return self.logic_offset - self.start_offset

    def physical(self, logical: int) -> int:
        return logical - self.logic_offset + self.start_offset

    def logical(self, physical: int) -> int:
        return self.logic_offset + (physical - self.start_offset)

    @property
    def logical_end(self) -> int | None:
        return self.logical(self.end_offset) if self.sealed else None


@dataclass(frozen=True, slots=True)
class LogicalQueue:
    topic: str
    queue_id: int  # logical queue id: what Consumer.pull and the Spark partitions use
    segments: tuple[Segment, ...]  # oldest first; the last one is open unless a remap is under way
    epoch: int
    static: bool

    @property
    def leader(self) -> Segment | None:
        if self.segments and not self.segments[-1].sealed:
            return self.segments[-1]
        return None

    def segment_for(self, logical: int) -> Segment:
        """The last segment starting at or before ``logical``, else the first one."""
        chosen = self.segments[0]
        for segment in self.segments:
            if segment.logic_offset <= logical:
                chosen = segment
            else:
                break
        return chosen

    def next_after(self, segment: Segment) -> Segment | None:
        for index, candidate in enumerate(self.segments):
            if candidate.gen == segment.gen and candidate.broker_name == segment.broker_name:
                return self.segments[index + 1] if index + 1 < len(self.segments) else None
        return None

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
                tuple(Segment.of(item, route.address_of(item.bname)) for item in mapping.items(logical_id)),
                mapping.epoch,
                True,
            )
            for logical_id in range(mapping.total_queues)
        ]
    return [
        LogicalQueue(
            route.topic,
            index,
            (Segment(ref.broker_name, route.address_of(ref.broker_name), ref.queue_id, 0, 0),),
            0,
            False,
        )
        for index, ref in enumerate(read_queues(route))
    ]


def physical_queue(route: TopicRouteData, broker_name: str, queue_id: int) -> LogicalQueue:
    """One broker's physical queue seen as a queue of its own (explicit addressing)."""
    return LogicalQueue(
        route.topic, queue_id, (Segment(broker_name, route.address_of(broker_name), queue_id, 0, 0),), 0, False
    )
