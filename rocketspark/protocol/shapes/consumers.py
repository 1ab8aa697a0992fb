"""Shapes of a consumer group's requests to a broker: membership, queue locks."""

from __future__ import annotations

from typing import Annotated, Final

from msgspec import Meta, field

from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.shapes.declared import RequestShape
from rocketspark.protocol.shapes.fields import (
    MAX_TOPICS_PER_REQUEST,
    ClientId,
    Name,
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


class MemberHeader(GroupHeader):
    client_id: ClientId
    topics: Topics = field(default_factory=list)
    # topic -> the last admin reset id the member applied or learnt (HEART_BEAT)
    resets_seen: Annotated[dict[Topic, Offset], Meta(max_length=MAX_TOPICS_PER_REQUEST)] = field(default_factory=dict)


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
}
