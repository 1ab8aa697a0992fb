"""Shapes of the static-topic requests and of a broker's queue mapping, which a broker's
registration carries too."""

from __future__ import annotations

from typing import Annotated, Final

from msgspec import Meta, field

from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.shapes.declared import RequestShape
from rocketspark.protocol.shapes.fields import (
    MAX_QUEUES,
    Name,
    NoFields,
    Offset,
    OffsetOrNone,
    QueueCount,
    QueueId,
    QueueKey,
    Shape,
    Topic,
)

# [gen, queue_id, bname, logic_offset, start_offset, end_offset, time_of_start, time_of_end]
MappingItem = tuple[Offset, QueueId, Name, Offset, Offset, OffsetOrNone, OffsetOrNone, OffsetOrNone]


class MappingDetail(Shape):
    """A broker's ``TopicQueueMappingDetail`` (see :mod:`rocketspark.protocol.static_mapping`)."""

    topic: Topic
    total_queues: QueueCount
    bname: Name
    epoch: Offset
    scope: Name = "__global__"
    hosted_queues: Annotated[
        dict[QueueKey, Annotated[list[MappingItem], Meta(min_length=1, max_length=MAX_QUEUES)]],
        Meta(max_length=MAX_QUEUES),
    ] = field(default_factory=dict)


class StaticTopicBody(Shape):
    mapping: MappingDetail
    force: bool = False
    # idempotent producers' sequences of the queues this broker takes over (broker.dedupe rows)
    producers: list[Annotated[list[int | str | float], Meta(min_length=7, max_length=7)]] = field(default_factory=list)


class SealHeader(Shape):
    topic: Topic
    logic_queue_ids: Annotated[list[QueueId], Meta(max_length=MAX_QUEUES)]


_C = RequestCode
SHAPES: Final[dict[int, RequestShape]] = {
    _C.UPDATE_AND_CREATE_STATIC_TOPIC: RequestShape(NoFields, StaticTopicBody),
    _C.SEAL_LOGIC_QUEUES: RequestShape(SealHeader),
}
