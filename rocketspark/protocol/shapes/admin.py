"""Shapes of a broker's admin requests: topics, the broker's permission, its counters."""

from __future__ import annotations

from typing import Final

from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.shapes.declared import RequestShape
from rocketspark.protocol.shapes.fields import NoFields, Perm, QueueCount, Shape, Topic, TopicHeader


class CreateTopicHeader(Shape):
    topic: Topic
    write_queue_nums: QueueCount = 8
    read_queue_nums: QueueCount = 8
    perm: Perm = 6
    trace: bool = False  # record its messages' lives (broker.trace)


class BrokerConfigHeader(Shape):
    broker_permission: Perm


_C = RequestCode
SHAPES: Final[dict[int, RequestShape]] = {
    _C.UPDATE_AND_CREATE_TOPIC: RequestShape(CreateTopicHeader),
    _C.DELETE_TOPIC_IN_BROKER: RequestShape(TopicHeader),
    _C.GET_ALL_TOPIC_CONFIG: RequestShape(NoFields),
    _C.GET_TOPIC_CONFIG: RequestShape(TopicHeader),
    _C.GET_TOPIC_STATS_INFO: RequestShape(TopicHeader),
    _C.GET_BROKER_RUNTIME_INFO: RequestShape(NoFields),
    _C.UPDATE_BROKER_CONFIG: RequestShape(BrokerConfigHeader),
    _C.GET_COUNTERS: RequestShape(NoFields),  # both servers answer it
}
