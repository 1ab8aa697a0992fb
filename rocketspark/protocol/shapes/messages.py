"""Shapes of the requests that move messages: send, pull, and look-ups by key or id."""

from __future__ import annotations

from typing import Annotated, Final

from msgspec import Meta, field

from rocketspark.filtering import MAX_EXPRESSION_CHARS
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.shapes.declared import RequestShape
from rocketspark.protocol.shapes.fields import (
    I64_MAX,
    MAX_TAGS,
    NAME_MAX,
    Count,
    Offset,
    OffsetOrNone,
    QueueCount,
    QueueId,
    QueueIdOrNone,
    Shape,
    Tag,
    Topic,
)
from rocketspark.protocol.validation import DEFAULT_TOPIC_QUEUE_NUMS


class SendHeader(Shape):
    topic: Topic
    queue_id: QueueIdOrNone = -1
    default_topic: Topic | None = None
    default_topic_queue_nums: QueueCount = DEFAULT_TOPIC_QUEUE_NUMS
    logic_queue_id: QueueIdOrNone = -1
    epoch: OffsetOrNone = -1
    producer_id: Annotated[str, Meta(max_length=NAME_MAX)] = ""
    seq: Offset = 0
    producer_group: Annotated[str, Meta(max_length=NAME_MAX)] = ""  # for message trace, when the sender has one
    client_host: Annotated[str, Meta(max_length=NAME_MAX)] = ""  # a translating endpoint's client, for trace


class PullHeader(Shape):
    topic: Topic
    queue_id: QueueId
    queue_offset: Offset
    max_msg_nums: Count = 32  # the broker reads at least 1 and at most 65,536
    max_bytes: Annotated[int, Meta(ge=1, le=I64_MAX)] | None = None
    suspend_timeout_ms: Count = 0
    tags: Annotated[list[Tag], Meta(max_length=MAX_TAGS)] = field(default_factory=list)
    sql: Annotated[str, Meta(max_length=MAX_EXPRESSION_CHARS)] | None = None  # an SQL92 filter expression
    end_offset: OffsetOrNone = -1
    logic_queue_id: QueueIdOrNone = -1
    gen: OffsetOrNone = -1
    epoch: OffsetOrNone = -1
    consumer_group: Annotated[str, Meta(max_length=NAME_MAX)] = ""  # for message trace, when the reader has one
    client_host: Annotated[str, Meta(max_length=NAME_MAX)] = ""  # a translating endpoint's client, for trace
    via: Annotated[str, Meta(max_length=NAME_MAX)] = ""  # how it reads (pull, pop, spark), for trace


class QueryMessageHeader(Shape):
    topic: Topic
    key: Annotated[str, Meta(min_length=1, max_length=NAME_MAX)]
    max_num: Count = 32


class ViewByIdHeader(Shape):
    offset: OffsetOrNone = -1  # a physical offset (an offset id's position), as RocketMQ's request has it
    msg_id: Annotated[str, Meta(max_length=NAME_MAX)] = ""  # or (ours) a client id, through the key index
    max_num: Count = 32


_C = RequestCode
SHAPES: Final[dict[int, RequestShape]] = {
    _C.SEND_MESSAGE: RequestShape(SendHeader, binary_body=True),
    _C.SEND_BATCH_MESSAGE: RequestShape(SendHeader, binary_body=True),
    _C.PULL_MESSAGE: RequestShape(PullHeader),
    _C.QUERY_MESSAGE: RequestShape(QueryMessageHeader),
    _C.VIEW_MESSAGE_BY_ID: RequestShape(ViewByIdHeader),
}
