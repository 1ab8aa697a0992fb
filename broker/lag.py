"""The lag of every group whose progress this broker keeps, by the rule ``admin progress``
uses (:func:`rocketspark.client.logical.count`): messages actually in segments after the
committed offset, so the gap a remap leaves between two segments is no backlog.

A normal topic's progress is kept per queue of this broker. A static topic's is kept per
logical queue by the broker leading it, which is the one that reports it: a broker that led
the queue before a remap keeps the group's older commit, but the queue's end is elsewhere.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from broker.offsets import ConsumerOffsets
from broker.static_topics import StaticTopics
from broker.store.store import MessageStore
from rocketspark.client.logical import LogicalQueue, Segment, count
from rocketspark.protocol.group_topics import LOGICAL_PREFIX
from rocketspark.protocol.static_mapping import LogicQueueMappingItem


@dataclass(frozen=True, slots=True)
class QueueLag:
    group: str
    topic: str
    queue_id: int  # a normal topic's queue on this broker; a static topic's logical queue
    committed: int
    end: int  # the queue's max offset (logical for a static topic)
    lag: int


class Lags:
    def __init__(self, broker_name: str, offsets: ConsumerOffsets, static: StaticTopics, store: MessageStore) -> None:
        self.broker_name = broker_name
        self.offsets = offsets
        self.static = static
        self.store = store

    def __iter__(self) -> Iterator[QueueLag]:
        for topic, group, queues in self.offsets.progress():
            logical = topic.startswith(LOGICAL_PREFIX)
            topic = topic.removeprefix(LOGICAL_PREFIX)
            for queue_id, committed in list(queues.items()):
                queue = self._logical(topic, queue_id) if logical else self._physical(topic, queue_id)
                if queue is None:
                    continue
                last = queue.segments[-1]
                end = last.logical(self.store.max_offset(topic, last.queue_id))
                lag = count(queue, committed, end) if end > committed else 0
                yield QueueLag(group, topic, queue_id, committed, end, lag)

    def _physical(self, topic: str, queue_id: int) -> LogicalQueue:
        item = LogicQueueMappingItem(gen=0, queue_id=queue_id, bname=self.broker_name, logic_offset=0)
        return LogicalQueue(topic, queue_id, (Segment(item, None),), 0, False)

    def _logical(self, topic: str, logical_id: int) -> LogicalQueue | None:
        detail = self.static.get(topic)
        if detail is None or detail.leader_of(logical_id) is None:
            return None  # this broker does not lead it (any more): its leader reports the lag
        segments = tuple(Segment(item, None) for item in detail.hosted_queues[logical_id])
        return LogicalQueue(topic, logical_id, segments, detail.epoch, True)
