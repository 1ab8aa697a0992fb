"""CONSUMER_SEND_MSG_BACK: a 4.x consumer failed on a message; the broker sends it back to the
group's retry topic, to be delivered again after a delay, or to its dead-letter topic once it
has been consumed ``maxReconsumeTimes`` times (RocketMQ's ``asyncConsumerSendMsgBack``).

The message is found by its physical offset (the request's ``offset``) among this broker's
queues of its topic and of the group's retry topic, else through the cluster by its offset id
(``originMsgId``: a static topic's message may be stored on another broker). Its copy keeps its
body, tag, keys, properties and client id, and says how often it was consumed again
(``RECONSUME_TIME``), its first topic (``RETRY_TOPIC``) and its first id (``ORIGIN_MESSAGE_ID``).
Delay level 0 means RocketMQ's default, ``3 + times consumed again`` (10 s, 30 s, 1 min, ...);
a negative level sends it to the dead-letter topic at once.
"""

from __future__ import annotations

import time

from broker.rocketmq4.context import Dialect
from broker.rocketmq4.lookup import messages_of
from broker.rocketmq4.queues import client_labels
from rocketspark.codec import ids
from rocketspark.errors import MessageNotFoundError
from rocketspark.grpcv2.clients import in_thread
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.group_topics import (
    DLQ_PREFIX,
    MAX_RECONSUME_TIMES,
    ORIGIN_MESSAGE_ID,
    RECONSUME_TIME,
    RETRY_TOPIC,
    dlq_topic,
    retry_topic,
)
from rocketspark.protocol.types import Message, MessageExt
from rocketspark.rocketmq4.headers import Fields


async def _find(dialect: Dialect, physical: int, topics: list[str], origin_id: str, user: str | None) -> MessageExt:
    """The message the consumer failed on: at ``physical`` here if a message of its topics
    is there, else wherever its id says (a static topic's message may be on another broker)."""
    if not (origin_id and ids.is_offset_msg_id(origin_id) and _elsewhere(dialect, origin_id)):
        answer = await dialect.queues.ours(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": physical}, user)
        found = [m for m in messages_of(answer) if m.topic in topics]
        if found:
            return found[0]
    if origin_id:
        return await in_thread(dialect.queues.clients.admin.query_message_by_id, origin_id)
    raise MessageNotFoundError(
        f"no message of {', '.join(topics)} at physical offset {physical} on broker {dialect.name} (deleted by "
        "retention?); it cannot be sent back"
    )


def _elsewhere(dialect: Dialect, offset_id: str) -> bool:
    """Whether an offset id names another broker than this one."""
    return ids.parse_offset_msg_id(offset_id).address != dialect.queues.address()


def _trace(dialect: Dialect, request: RemotingCommand, message: MessageExt, group: str, to: str, times: int) -> None:
    """The failed message's trace, when its first topic is traced: sent back, to retry or DLQ."""
    if dialect.trace.traced_topic(message.properties.get(RETRY_TOPIC, message.topic)):
        labels = client_labels(request, "group", group)
        kind = "to DLQ" if to.startswith(DLQ_PREFIX) else "retried"
        detail = f"consume failed (attempt {times}), sent back to {to}"
        dialect.trace.noted(kind, message, group, str(labels.get("clientHost", "")), detail)


async def handle_send_back(dialect: Dialect, request: RemotingCommand) -> RemotingCommand:
    fields = Fields("CONSUMER_SEND_MSG_BACK", request.ext)
    group, physical = fields.text("group"), fields.integer("offset")
    origin_topic = fields.text("originTopic", "")
    origin_id = fields.text("originMsgId", "")
    max_times = fields.integer("maxReconsumeTimes", MAX_RECONSUME_TIMES)
    level = fields.integer("delayLevel", 0)
    dialect.queues.authorize(RequestCode.HEART_BEAT, {"consumerGroup": group, "clientId": "-"}, request.user)
    topics = [t for t in (origin_topic, retry_topic(group)) if t]
    message = await _find(dialect, physical, topics, origin_id, request.user)
    props = dict(message.properties)
    times = int(props.get(RECONSUME_TIME, "0") or 0) + 1
    props[RECONSUME_TIME] = str(times)
    props.setdefault(RETRY_TOPIC, message.topic)
    props.setdefault(ORIGIN_MESSAGE_ID, origin_id or props.get("UNIQ_KEY", ""))
    dead = level < 0 or times > max_times
    topic = dlq_topic(group) if dead else retry_topic(group)
    copy = Message(topic, message.body, tags=message.tags, keys=message.keys, properties=props)
    _trace(dialect, request, message, group, topic, times)
    if dead:
        await in_thread(dialect.queues.clients.producer.send, copy)
        return request.response()
    wait_ms = dialect.delay_levels.ms(level if level > 0 else 3 + times - 1)
    await dialect.held.delay(copy, int(time.time() * 1000) + wait_ms, request.user)
    return request.response()
