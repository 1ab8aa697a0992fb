"""SEND_MESSAGE, SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE from 4.x producers.

A send is stored as ours: its messages become one batch record (a single send a batch of one)
and go through our send handler, or, for a static topic's logical queue, through our producer.
A compressed body is inflated first, so every consumer reads what was sent. A message without
a client id (ali-ons sets none) gets one from the broker, as RocketMQ 5's broker gives one.
A delay message (``DELAY`` level and kin) waits in the broker's timer; a half message
(``TRAN_MSG``) in its half topic until END_TRANSACTION. A send to a group's retry topic that
has been consumed ``maxReconsumeTimes`` times goes to its dead-letter topic instead (RocketMQ's
``handleRetryAndDLQ``).

The answer is RocketMQ's ``SendMessageResponseHeader``: ``msgId`` is the offset id of the
(first) stored message, comma-joined for a batch, as Java's and Go's clients read it.
"""

from __future__ import annotations

from broker.rocketmq4.context import Dialect
from broker.rocketmq4.messages import deliver_at_ms, to_message
from broker.rocketmq4.queues import client_labels
from rocketspark.codec.build import encode_messages
from rocketspark.errors import InvalidParameterError, MessageTooLargeError
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.group_topics import DLQ_PREFIX, MAX_RECONSUME_TIMES, RETRY_PREFIX
from rocketspark.protocol.properties import PRODUCER_GROUP, TRANSACTION_PREPARED
from rocketspark.protocol.types import Message
from rocketspark.protocol.validation import DEFAULT_TOPIC_QUEUE_NUMS, validate_topic_name
from rocketspark.rocketmq4 import records
from rocketspark.rocketmq4.headers import Fields, send_fields


async def handle_send(dialect: Dialect, request: RemotingCommand, *, short: bool, batch: bool) -> RemotingCommand:
    fields = Fields("SEND_MESSAGE", send_fields(request.ext, short))
    topic = fields.text("topic")
    validate_topic_name(topic)
    queue_id = fields.integer("queueId", -1)
    sys_flag = fields.integer("sysFlag", 0)
    born_ms = fields.integer("bornTimestamp", 0) or None
    if batch:
        messages = [to_message(topic, m.body, m.properties) for m in records.batch_messages(request.body)]
        if not messages:
            raise InvalidParameterError("SEND_BATCH_MESSAGE carries no message")
    else:
        properties = records.parse_properties(fields.text("properties", ""))
        messages = [to_message(topic, records.inflate(request.body, sys_flag), properties)]
    for message in messages:
        _check_size(dialect, message)
        if not message.properties.get("UNIQ_KEY"):
            message.properties["UNIQ_KEY"] = dialect.mint_id()
    topic = _retry_or_dead(topic, fields)
    for message in messages:
        message.topic = topic
    first = messages[0]
    if not batch and first.properties.get(TRANSACTION_PREPARED) == "true":
        return await _half(dialect, request, first, fields)
    due = deliver_at_ms(first.properties, dialect.delay_levels) if not batch else None
    if due is not None:
        return await _delayed(dialect, request, first, due)
    ext = client_labels(request, "producerGroup", fields.text("producerGroup", ""))
    sender = dialect.connections.sender(request.channel)
    if sender is not None:  # the client id its heartbeat gave, for message trace
        ext["clientId"] = sender.client_id
    default_topic = fields.text("defaultTopic", "")
    if default_topic and not dialect.topic_exists(topic):  # 4.x clients always name TBW102; only a new topic needs it
        queue_nums = fields.integer("defaultTopicQueueNums", DEFAULT_TOPIC_QUEUE_NUMS)
        ext.update(defaultTopic=default_topic, defaultTopicQueueNums=queue_nums)
    record = encode_messages(topic, messages, born_ms=born_ms)
    stored = await dialect.queues.send(topic, queue_id, record, request.user, **ext)
    return request.response(
        ext={
            "msgId": ",".join(stored.offset_msg_ids(len(messages))),
            "queueId": stored.queue_id,
            "queueOffset": stored.queue_offset,
            "transactionId": first.properties["UNIQ_KEY"] if not batch else "",
            "MSG_REGION": "DefaultRegion",
            "TRACE_ON": "true",
        }
    )


def _check_size(dialect: Dialect, message: Message) -> None:
    limit = dialect.config.max_message_bytes
    if len(message.body) > limit:
        raise MessageTooLargeError(
            f"a {len(message.body)}-byte message body is over broker {dialect.name}'s limit of {limit} bytes "
            "(max_message_bytes); split the payload or raise the limit"
        )


def _retry_or_dead(topic: str, fields: Fields) -> str:
    """A message sent back to a group's retry topic after ``maxReconsumeTimes`` consumptions
    goes to the group's dead-letter topic."""
    if not topic.startswith(RETRY_PREFIX):
        return topic
    reconsumed = fields.integer("reconsumeTimes", 0)
    if reconsumed >= fields.integer("maxReconsumeTimes", MAX_RECONSUME_TIMES):
        return DLQ_PREFIX + topic[len(RETRY_PREFIX) :]
    return topic


async def _delayed(dialect: Dialect, request: RemotingCommand, message: Message, due_ms: int) -> RemotingCommand:
    offset = await dialect.held.delay(message, due_ms, request.user)
    return request.response(
        ext={
            "msgId": message.properties["UNIQ_KEY"],
            "queueId": 0,
            "queueOffset": offset,
            "MSG_REGION": "DefaultRegion",
            "TRACE_ON": "true",
        }
    )


async def _half(dialect: Dialect, request: RemotingCommand, message: Message, fields: Fields) -> RemotingCommand:
    """A half message: held until its producer ends the transaction. The reply's ``msgId`` and
    ``queueOffset`` name it (Java sends them back in END_TRANSACTION)."""
    message.properties.setdefault(PRODUCER_GROUP, fields.text("producerGroup", ""))
    half = await dialect.held.half(message, request.user)
    return request.response(
        ext={
            "msgId": half.offset_msg_id,
            "queueId": 0,
            "queueOffset": half.queue_offset,
            "transactionId": message.properties["UNIQ_KEY"],
            "MSG_REGION": "DefaultRegion",
            "TRACE_ON": "true",
        }
    )
