"""Shapes of the offset requests: a queue's bounds, a group's committed offsets, resets."""

from __future__ import annotations

from typing import Annotated, Final

from msgspec import Meta

from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.shapes.declared import RequestShape
from rocketspark.protocol.shapes.fields import (
    MAX_QUEUES,
    Name,
    NoFields,
    Offset,
    OffsetOrNone,
    QueueId,
    QueueIdOrNone,
    QueueKey,
    Shape,
    Topic,
)


class ResetOffsetHeader(Shape):
    consumer_group: Name
    topic: Topic


class ResetOffsetBody(Shape):
    version: Offset  # the reset's id, the same on every broker: consumers apply each one once
    offsets: Annotated[dict[QueueKey, Offset], Meta(max_length=MAX_QUEUES)]


class QueueHeader(Shape):
    topic: Topic
    queue_id: QueueId


class SearchHeader(QueueHeader):
    timestamp: Offset


class GroupOffsetHeader(Shape):
    consumer_group: Name
    topic: Topic
    queue_id: QueueId
    logical: bool = False
    logic_queue_id: QueueIdOrNone = -1
    gen: OffsetOrNone = -1
    epoch: OffsetOrNone = -1


class CommitHeader(GroupOffsetHeader):
    commit_offset: Offset = 0
    reset_version: OffsetOrNone = -1  # the last offset reset the committer applied; -1: not a group consumer


_C = RequestCode
SHAPES: Final[dict[int, RequestShape]] = {
    _C.GET_ALL_CONSUMER_OFFSET: RequestShape(NoFields),
    _C.INVOKE_BROKER_TO_RESET_OFFSET: RequestShape(ResetOffsetHeader, ResetOffsetBody),
    _C.GET_MAX_OFFSET: RequestShape(QueueHeader),
    _C.GET_MIN_OFFSET: RequestShape(QueueHeader),
    _C.SEARCH_OFFSET_BY_TIMESTAMP: RequestShape(SearchHeader),
    _C.QUERY_CONSUMER_OFFSET: RequestShape(GroupOffsetHeader),
    _C.UPDATE_CONSUMER_OFFSET: RequestShape(CommitHeader),
}
