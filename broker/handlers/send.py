"""SEND_MESSAGE and SEND_BATCH_MESSAGE: validate, auto-create if allowed, store, answer.

Header fields: ``topic``, ``queueId`` (-1 or absent: the broker picks), ``defaultTopic`` and
``defaultTopicQueueNums`` (auto-create template, as RocketMQ's producer sends them),
``logicQueueId`` + ``epoch`` (static topics) and ``producerId`` + ``seq`` (idempotent sends,
see :mod:`broker.dedupe`). The body
is a batch (see :mod:`rocketspark.protocol.codec`); a single send is a batch of one.
"""

from __future__ import annotations

import asyncio
import random
from functools import partial
from typing import TYPE_CHECKING

from rocketspark.errors import InvalidParameterError, MessageTooLargeError, NoPermissionError, TopicNotExistError
from rocketspark.protocol import record
from rocketspark.protocol.codec import check_payload, decode_send_batch
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.headers import get_int, get_str
from rocketspark.protocol.types import Perm, SendStatus, TopicConfig
from rocketspark.protocol.validation import validate_topic_name

if TYPE_CHECKING:
    from broker.server import Broker


def register(broker: Broker) -> None:
    broker.dispatcher.register(RequestCode.SEND_MESSAGE, partial(handle_send, broker))
    broker.dispatcher.register(RequestCode.SEND_BATCH_MESSAGE, partial(handle_send, broker))


async def resolve_topic(broker: Broker, cmd: RemotingCommand, topic: str) -> TopicConfig:
    """The topic's config, auto-creating it from the template when the broker allows it."""
    config = broker.topics.get(topic)
    if config is None:
        template = get_str(cmd, "defaultTopic", "")
        if template and broker.config.auto_create_topic_enable:
            queue_nums = get_int(cmd, "defaultTopicQueueNums", 4)
            config = broker.topics.auto_create(topic, template, queue_nums, broker.store.commitlog.max_offset)
            if config is not None:
                # Register before answering, as RocketMQ's registerIncrementBrokerData does
                # (bounded by register_timeout_ms per nameserver), naming the new topic so that
                # clients waiting for it (negative cache) hear of it. The producer looks the new
                # route up on its next send; were it not registered yet, that send would go
                # through the template again and could create the topic on another broker.
                task = asyncio.get_running_loop().create_task(broker.registry.register_now([topic], incremental=True))
                broker.background.add(task)
                task.add_done_callback(broker.background.discard)
                await asyncio.shield(task)  # a cancelled send does not cancel the registration
    if config is None:
        why = (
            "auto-create is off on this broker (auto_create_topic_enable = false)"
            if not broker.config.auto_create_topic_enable
            else "the send did not ask to auto-create it"
        )
        raise TopicNotExistError(
            f'topic "{topic}" does not exist on broker {broker.name} and {why}; create it first with '
            f"`rocketspark admin create-topic {topic}`"
        )
    return config


def check_writable(broker: Broker, config: TopicConfig) -> None:
    if not broker.perm & Perm.WRITE:
        raise NoPermissionError(
            f"broker {broker.name} is not accepting writes (its write permission was wiped, usually for "
            "maintenance); send to another broker of the topic"
        )
    if not config.perm & Perm.WRITE:
        raise NoPermissionError(
            f'topic "{config.name}" is not writable on broker {broker.name} (perm {Perm.describe(config.perm)})'
        )


def validate_entries(broker: Broker, body: bytes) -> tuple[int, list[bytes], list[int]]:
    """Decode the batch, enforce the size limit, and compute each message's tag hash."""
    born, payloads = decode_send_batch(body)
    limit = broker.config.max_message_bytes
    hashes: list[int] = []
    append = hashes.append
    for index, payload in enumerate(payloads):
        tag_hash, body_len = check_payload(payload)
        if body_len > limit:
            raise MessageTooLargeError(_too_large(broker, index, body_len, limit))
        append(tag_hash)
    return born, payloads, hashes


def _too_large(broker: Broker, index: int, size: int, limit: int) -> str:
    return (
        f"message {index} of the batch has a {size}-byte body, over broker {broker.name}'s limit of {limit} bytes "
        "(max_message_bytes); split the payload or raise the limit"
    )


def target_queue(broker: Broker, cmd: RemotingCommand, config: TopicConfig) -> tuple[int, int, int | None]:
    """(physical queue id, offset delta, logical queue id) of the send.

    A static topic is written through its logical queues: only the broker leading the logical
    queue accepts, on that segment's physical queue.
    """
    topic = config.name
    if broker.static.is_static(topic):
        logical_id = get_int(cmd, "logicQueueId", -1)
        if logical_id < 0:
            raise InvalidParameterError(
                f'topic "{topic}" is a static topic: send to a logical queue (logicQueueId), as the rocketspark '
                "Producer does"
            )
        leader = broker.static.leader_for_send(topic, logical_id, get_int(cmd, "epoch", -1))
        return leader.queue_id, leader.offset_delta, logical_id
    queue_id = get_int(cmd, "queueId", -1)
    if queue_id < 0:
        return random.randrange(config.write_queue_nums), 0, None
    if queue_id >= config.write_queue_nums:
        raise InvalidParameterError(
            f'queue {queue_id} does not exist: topic "{topic}" has {config.write_queue_nums} write queues on '
            f"broker {broker.name}"
        )
    return queue_id, 0, None


async def handle_send(broker: Broker, cmd: RemotingCommand) -> RemotingCommand:
    topic = get_str(cmd, "topic")
    validate_topic_name(topic)
    born, payloads, hashes = validate_entries(broker, cmd.body)  # a malformed body is reported first
    broker.role.check_writable()  # a slave, or a master whose lease ran out, never takes a write
    broker.replication.check_can_acknowledge()
    config = await resolve_topic(broker, cmd, topic)
    check_writable(broker, config)
    queue_id, delta, logical_id = target_queue(broker, cmd, config)
    producer_id = get_str(cmd, "producerId", "")
    skipped = 0
    if producer_id:
        seq = get_int(cmd, "seq")
        key = (producer_id, topic, queue_id)
        skipped = broker.producers.already_stored(key, seq, len(payloads))
        if skipped:
            broker.producers.duplicates_dropped += skipped
            payloads, hashes = payloads[skipped:], hashes[skipped:]
    ext: dict[str, object] = {"queueId": queue_id, "duplicates": skipped}
    if logical_id is not None:
        ext["logicQueueId"] = logical_id
    if not payloads:
        return cmd.response(ext={**ext, "queueOffset": -1, "count": 0, "msgId": "", "status": SendStatus.SEND_OK.value})
    result = broker.store.put(topic, queue_id, born, payloads, hashes)
    if producer_id:
        broker.producers.stored((producer_id, topic, queue_id), seq + skipped, result.count, result.end_offset)
    broker.longpoll.notify((topic, queue_id))
    status = SendStatus.SEND_OK
    broker.replication.appended()
    if broker.config.flush_mode == "sync" and not await broker.store.wait_flushed(result.end_offset):
        status = SendStatus.FLUSH_DISK_TIMEOUT
    await broker.replication.acknowledge(result.end_offset)  # in_sync_replicas of the group hold it
    ext.update(
        queueOffset=result.first_queue_offset + delta,
        count=result.count,
        msgId=record.msg_id(broker.name, result.first_offset),
        status=status.value,
    )
    return cmd.response(ext=ext)
