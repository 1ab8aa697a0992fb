"""Shapes of a client's group requests to a broker: membership (a consumer group's, or a
producer group's announcement), queue locks, and who is connected."""

from __future__ import annotations

from typing import Annotated, Final, Literal

from msgspec import Meta, field

from rocketspark.filtering import MAX_EXPRESSION_CHARS
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.shapes.declared import RequestShape
from rocketspark.protocol.shapes.fields import (
    MAX_TOPICS_PER_REQUEST,
    NAME_MAX,
    ClientId,
    Name,
    NoFields,
    Offset,
    OffsetOrNone,
    QueueId,
    QueueIdOrNone,
    Shape,
    Topic,
    Topics,
)


class GroupHeader(Shape):
    consumer_group: Name


OptionalName = Annotated[str, Meta(max_length=NAME_MAX)]


class MemberHeader(Shape):
    """A client's HEART_BEAT or UNREGISTER_CLIENT: a consumer group's member (its topics and
    filter), or a producer announcing its group; the handler asks for one of the two groups."""

    client_id: ClientId
    consumer_group: OptionalName = ""
    producer_group: OptionalName = ""
    topics: Topics = field(default_factory=list)
    # topic -> the last admin reset id the member applied or learnt (HEART_BEAT)
    resets_seen: Annotated[dict[Topic, Offset], Meta(max_length=MAX_TOPICS_PER_REQUEST)] = field(default_factory=dict)
    expression_type: Literal["TAG", "SQL92"] = "TAG"  # the consumer's filter, for operators
    expression: Annotated[str, Meta(max_length=MAX_EXPRESSION_CHARS)] = "*"
    client_version: OptionalName = ""  # "rocketspark 0.1.0"


class ProducerGroupHeader(Shape):
    producer_group: Name


class QueueLockHeader(Shape):
    """A group member's lock on a queue, addressed as a group offset is."""

    consumer_group: Name
    client_id: ClientId
    topic: Topic
    queue_id: QueueId
    logical: bool = False
    logic_queue_id: QueueIdOrNone = -1
    gen: OffsetOrNone = -1
    epoch: OffsetOrNone = -1


_C = RequestCode
SHAPES: Final[dict[int, RequestShape]] = {
    _C.HEART_BEAT: RequestShape(MemberHeader),
    _C.UNREGISTER_CLIENT: RequestShape(MemberHeader),
    _C.LOCK_BATCH_MQ: RequestShape(QueueLockHeader),
    _C.UNLOCK_BATCH_MQ: RequestShape(QueueLockHeader),
    _C.GET_CONSUMER_LIST_BY_GROUP: RequestShape(GroupHeader),
    _C.GET_CONSUMER_CONNECTION_LIST: RequestShape(GroupHeader),
    _C.GET_PRODUCER_CONNECTION_LIST: RequestShape(ProducerGroupHeader),
    _C.GET_ALL_PRODUCER_INFO: RequestShape(NoFields),
}
