"""The groups' retry and dead-letter topics for the operator: which there are, and a message
sent to one group again (RocketMQ Dashboard's DLQ page and "resend message").

A resend goes to the group's retry topic, ``%RETRY%<group>``, as a consumer's send-back does
(:mod:`rocketspark.client.retry`), so only that group consumes it again: our group consumers
and RocketMQ 4.x push consumers read their group's retry topic. RocketMQ 5 (gRPC, v2) pop
consumers do not: the endpoint redelivers their failures itself and never reads the retry
topic, so a resend does not reach them. On its own::

    from rocketspark.client.admin_core import AdminConnection
    from rocketspark.client.retry_admin import group_topics, resend_message

    with AdminConnection("127.0.0.1:9876") as connection:
        print([(t.topic, t.messages) for t in group_topics(connection)])
        resend_message(connection, "7F00000100002A9F0000000000000000", "billing")
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from rocketspark.client.admin_core import MessageCore
from rocketspark.client.group_admin import Groups
from rocketspark.client.message_admin import query_message_by_id
from rocketspark.client.topic_admin import Topics
from rocketspark.errors import InvalidParameterError, RocketSparkError, TopicNotExistError
from rocketspark.protocol import properties as p
from rocketspark.protocol.group_topics import (
    DLQ_PREFIX,
    DUE_AT_MS,
    ORIGIN_MESSAGE_ID,
    RECONSUME_TIME,
    RETRY_TOPIC,
    group_of,
    retry_topic,
)
from rocketspark.protocol.types import Message, MessageExt, SendResult

# What a resent copy must not keep: its id (it gets a fresh one), its retry count and due time
# (consumed again from 0, now), and what would hold it again (a delay, a transaction's half).
_NOT_KEPT: Final = frozenset(
    {
        p.UNIQ_KEY,
        DUE_AT_MS,
        p.REAL_TOPIC,
        p.DELIVER_MS,
        p.DELAY_LEVEL,
        p.START_DELIVER_TIME,
        p.TIMER_DELAY_SEC,
        p.TIMER_DELAY_MS,
        p.TRANSACTION_PREPARED,
    }
)


@dataclass(frozen=True, slots=True)
class GroupTopic:
    """A group's retry or dead-letter topic."""

    topic: str
    group: str
    kind: str  # "retry" or "dlq"
    messages: int  # stored now (over its queues, as topic_status counts them)


def group_topics(core: MessageCore) -> list[GroupTopic]:
    """Every ``%RETRY%`` and ``%DLQ%`` topic of the cluster, sorted by topic."""
    topics = Topics(core)
    out = []
    for name in sorted(topics()):
        group = group_of(name)
        if group is None:
            continue
        try:
            stored = sum(q.messages for q in topics.status(name))
        except RocketSparkError:  # deleted between the list and its status
            continue
        out.append(GroupTopic(name, group, "dlq" if name.startswith(DLQ_PREFIX) else "retry", stored))
    return out


def resend_copy(message: MessageExt, group: str) -> Message:
    """The copy of ``message`` that ``group`` consumes again: in its retry topic, under the
    topic it was first sent to (RETRY_TOPIC, kept from a retry or DLQ message), its first id
    (ORIGIN_MESSAGE_ID), body, tag, keys and user properties, a fresh id, consumed again 0
    times, due now."""
    properties = {k: v for k, v in message.properties.items() if k not in _NOT_KEPT}
    properties.setdefault(RETRY_TOPIC, message.topic)
    properties.setdefault(ORIGIN_MESSAGE_ID, message.msg_id)
    properties[RECONSUME_TIME] = "0"
    return Message(retry_topic(group), message.body, tags=message.tags, keys=message.keys, properties=properties)


def resend_message(core: MessageCore, msg_id: str, group: str) -> SendResult:
    """Send a copy of the message with this id (client id or offset id) to ``group``'s retry
    topic, so that only that group consumes it again (our group consumers, RocketMQ 4.x push
    consumers; not RocketMQ 5 pop consumers). The group must be known to the cluster (progress
    or members on some broker), so a typo creates nothing nobody reads."""
    from rocketspark.client.producer import Producer

    name = group.strip()
    if not name:
        raise InvalidParameterError("a consumer group is required: the group that is to consume the message again")
    message = query_message_by_id(core, msg_id)
    known = Groups(core).known()
    if name not in known:
        shown = ", ".join(sorted(known)) or "none"
        raise InvalidParameterError(
            f'consumer group "{name}" is unknown: no broker keeps its progress or has heard from its consumers '
            f"(known groups: {shown}). Check the name (`rocketspark admin groups` lists them)"
        )
    target = retry_topic(name)
    try:
        core.topic_route(target)
    except TopicNotExistError:
        raise InvalidParameterError(
            f'group "{name}" has no retry topic {target}: none of its consumers reads one (a group consumer or a '
            "RocketMQ 4.x consumer of it creates it when it first heartbeats; RocketMQ 5 pop consumers and Spark "
            "read none), so nothing would consume the copy"
        ) from None
    with core.sibling(Producer, auto_create_topics=False, send_timeout_ms=core.timeout_ms) as producer:
        return producer.send(resend_copy(message, name))
