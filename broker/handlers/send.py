"""SEND_MESSAGE and SEND_BATCH_MESSAGE: validate, auto-create if allowed, store, answer.

Header fields: ``topic``, ``queueId`` (-1 or absent: the broker picks), ``defaultTopic`` and
``defaultTopicQueueNums`` (auto-create template, as RocketMQ's producer sends them),
``logicQueueId`` + ``epoch`` (static topics). The body is one batch record
(:mod:`rocketspark.codec.layout`), a single send a batch of one; it is checked once and
stored as it came, with the fields the broker assigns. Its header names an idempotent
producer, if any (:mod:`broker.dedupe`), and its messages' first client id: a record without
one (or of the previous version) is given ids the broker mints, as RocketMQ 5's broker gives a
message without ``UNIQ_KEY`` one. The answer's ``msgId`` is the first stored message's offset
id (RocketMQ's meaning of the field) and ``firstMsgId`` its client id as the record gives it.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Final

from broker.config import BrokerConfig
from broker.connections import Connections
from broker.dedupe import ProducerTable
from broker.diskuse import DiskUse
from broker.ha.replication import Replication
from broker.ha.role import Role
from broker.longpoll import LongPollHub
from broker.registry import Registry
from broker.static_topics import StaticTopics
from broker.store.store import MessageStore
from broker.store.values import PutResult
from broker.topics import TopicTable
from broker.trace import TraceRecorder, born_ms, client_of
from rocketspark.codec import ids
from rocketspark.codec.build import drop_front, tag_summary_of, with_first_id
from rocketspark.codec.ingest import built_here, check_sent
from rocketspark.codec.sent import BatchRefused, BodyTooLarge, SentBatch
from rocketspark.errors import InvalidParameterError, MessageTooLargeError, TopicNotExistError
from rocketspark.protocol.bodies import MalformedBody
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.headers import get_int, get_str
from rocketspark.protocol.types import SendStatus, TopicConfig
from rocketspark.protocol.validation import DEFAULT_TOPIC_QUEUE_NUMS, HELD_TOPIC_PREFIXES, validate_topic_name
from rocketspark.remoting.server import Dispatcher

SEND_OK: Final = SendStatus.SEND_OK.value  # an Enum member's value is read as Python: once, here
FLUSH_DISK_TIMEOUT: Final = SendStatus.FLUSH_DISK_TIMEOUT.value


@dataclass(frozen=True, slots=True)
class SendContext:
    """What a send touches."""

    name: str
    config: BrokerConfig
    topics: TopicTable
    static: StaticTopics
    store: MessageStore
    producers: ProducerTable
    longpoll: LongPollHub
    role: Role
    replication: Replication
    registry: Registry
    disk: DiskUse
    address: Callable[[], str]  # this broker's advertised host:port, as offset ids name it
    trace: TraceRecorder
    connections: Connections  # who sent a traced batch: its producer group and client id


def register(dispatcher: Dispatcher, ctx: SendContext) -> None:
    dispatcher.register(RequestCode.SEND_MESSAGE, partial(handle_send, ctx))
    dispatcher.register(RequestCode.SEND_BATCH_MESSAGE, partial(handle_send, ctx))


async def resolve_topic(ctx: SendContext, cmd: RemotingCommand, topic: str) -> TopicConfig:
    """The topic's config, auto-creating it from the template when the broker allows it."""
    config = ctx.topics.get(topic)
    if config is None:
        template = get_str(cmd, "defaultTopic", "")
        if template and ctx.config.auto_create_topic_enable:
            queue_nums = get_int(cmd, "defaultTopicQueueNums", DEFAULT_TOPIC_QUEUE_NUMS)
            config = ctx.topics.auto_create(topic, template, queue_nums, ctx.store.log_max_offset)
            if config is not None:
                # Register before answering, as RocketMQ's registerIncrementBrokerData does
                # (bounded by register_timeout_ms per nameserver), naming the new topic so that
                # clients waiting for it (negative cache) hear of it. The producer looks the new
                # route up on its next send; were it not registered yet, that send would go
                # through the template again and could create the topic on another broker.
                await ctx.registry.register_shielded([topic])  # a cancelled send does not cancel it
    if config is None:
        why = (
            "auto-create is off on this broker (auto_create_topic_enable = false)"
            if not ctx.config.auto_create_topic_enable
            else "the send did not ask to auto-create it"
        )
        raise TopicNotExistError(
            f'topic "{topic}" does not exist on broker {ctx.name} and {why}; create it first with '
            f"`rocketspark admin create-topic {topic}`"
        )
    return config


def check_batch(ctx: SendContext, body: bytes, topic: str) -> SentBatch:
    """Check the sent record (:mod:`rocketspark.codec.ingest`) against the broker's limits."""
    limit, batch_limit = ctx.config.max_message_bytes, ctx.config.batch_limit
    try:  # a message over its limit is named first, though its batch is over the batch limit too
        batch = check_sent(body, max_body=limit, max_section=max(len(body), batch_limit))
    except BodyTooLarge as exc:
        raise MessageTooLargeError(
            f"message {exc.index} of the batch has a {exc.size}-byte body, over broker {ctx.name}'s limit of "
            f"{limit} bytes (max_message_bytes); split the payload or raise the limit"
        ) from None
    except BatchRefused as refused:  # a name of its own: compiled (setup.py), a name has one type
        raise MalformedBody(f"{refused}; the producer must build sends with rocketspark.codec") from None
    if len(body) > batch_limit:
        raise MessageTooLargeError(
            f"a batch of {len(body)} bytes is over broker {ctx.name}'s limit of {batch_limit} bytes "
            "(max_batch_bytes); send fewer messages at once"
        )
    if batch.topic != topic.encode():
        raise MalformedBody(f"the batch record names topic {batch.topic!r}, the request topic {topic!r}")
    return batch


def target_queue(ctx: SendContext, cmd: RemotingCommand, config: TopicConfig) -> tuple[int, int, int | None]:
    """(physical queue id, offset delta, logical queue id) of the send.

    A static topic is written through its logical queues: only the broker leading the logical
    queue accepts, on that segment's physical queue.
    """
    topic = config.name
    if ctx.static.is_static(topic):
        logical_id = get_int(cmd, "logicQueueId", -1)
        if logical_id < 0:
            raise InvalidParameterError(
                f'topic "{topic}" is a static topic: send to a logical queue (logicQueueId), as the rocketspark '
                "Producer does"
            )
        leader = ctx.static.leader_for_send(topic, logical_id, get_int(cmd, "epoch", -1))
        return leader.queue_id, leader.offset_delta, logical_id
    queue_id = get_int(cmd, "queueId", -1)
    if queue_id < 0:
        return random.randrange(config.write_queue_nums), 0, None
    if queue_id >= config.write_queue_nums:
        raise InvalidParameterError(
            f'queue {queue_id} does not exist: topic "{topic}" has {config.write_queue_nums} write queues on '
            f"broker {ctx.name}"
        )
    return queue_id, 0, None


async def handle_send(ctx: SendContext, cmd: RemotingCommand) -> RemotingCommand:
    started = time.perf_counter()
    topic = get_str(cmd, "topic")
    validate_topic_name(topic)
    config = ctx.topics.get(topic)
    body = cmd.body
    batch = built_here(body) if cmd.local else check_batch(ctx, body, topic)  # a malformed body is reported first
    ctx.role.check_writable()  # a slave, or a master whose lease ran out, never takes a write
    ctx.replication.check_can_acknowledge()
    ctx.disk.check_writable()  # above disk_refuse_writes_ratio: nothing is stored
    if config is None:  # a coroutine only when it is missing
        config = await resolve_topic(ctx, cmd, topic)
    ctx.topics.check_writable(config)
    queue_id, delta, logical_id = target_queue(ctx, cmd, config)
    count, skipped = batch.count, 0
    key = (batch.producer_id, topic, queue_id)
    if batch.producer_id:
        skipped = ctx.producers.already_stored(key, batch.producer_epoch, batch.base_sequence, count)
        if skipped:
            ctx.producers.duplicates_dropped += skipped
            if skipped < count:
                body = drop_front(body, skipped)
    ext: dict[str, object] = {"queueId": queue_id, "duplicates": skipped}
    if logical_id is not None:
        ext["logicQueueId"] = logical_id
    if skipped == count:
        return _all_duplicates(cmd, ext)
    first = batch.first_id
    if first is None:  # no ids given (or a record of version 2): the broker mints them
        body, first = _with_ids(body, count - skipped)
    elif skipped:
        first = bytes.fromhex(ids.client_id_at(first, skipped))  # drop_front's record starts there
    summary = batch.tag_summary if not skipped else tag_summary_of(body)
    result = ctx.store.put(topic, queue_id, body, count - skipped, summary)
    if batch.kinds and not topic.startswith(HELD_TOPIC_PREFIXES):  # the metrics' message_type: fifo, delay...
        # ...or transaction, counted once, where the message reaches its topic: its held copy is no send of its own
        ctx.store.stats.typed(topic, batch.kinds, result.count, len(body))
    if batch.producer_id:
        ctx.producers.stored(key, batch.producer_epoch, batch.base_sequence + skipped, result.count, result.end_offset)
    ctx.longpoll.notify((topic, queue_id))
    status = SEND_OK
    ctx.replication.appended()
    if ctx.config.flush_mode == "sync" and not await ctx.store.flusher.wait_flushed(result.end_offset):
        status = FLUSH_DISK_TIMEOUT
    if ctx.replication.waits_for_slaves:
        await ctx.replication.acknowledge(result.end_offset)  # in_sync_replicas of the group hold it
    ext.update(
        queueOffset=result.first_queue_offset + delta,
        count=result.count,
        msgId=ids.offset_msg_id_at(ids.store_host(ctx.address()), result.first_offset),
        firstMsgId=ids.client_id_hex(first),
        status=status,
    )
    if ctx.trace.traced(config):
        _trace_sent(ctx, cmd, topic, result, (queue_id, delta), body, ids.client_id_hex(first), started)
    return cmd.response(ext=ext)


def _all_duplicates(cmd: RemotingCommand, ext: dict[str, object]) -> RemotingCommand:
    """The answer to a resent batch whose every message was stored before."""
    return cmd.response(ext={**ext, "queueOffset": -1, "count": 0, "msgId": "", "firstMsgId": "", "status": SEND_OK})


def _trace_sent(
    ctx: SendContext,
    cmd: RemotingCommand,
    topic: str,
    result: PutResult,
    queue: tuple[int, int],
    record: bytes,
    first_id: str,
    started: float,
) -> None:
    """One tuple for the trace recorder: the record stored, by whom, how long it took here.
    The producer group is the send's (a 4.x send names it; the v2 endpoint names a v5
    producer's), else the one its client announced here (ours, by heartbeat)."""
    queue_id, delta = queue
    group, client, named = str(cmd.ext.get("producerGroup", "")), client_of(cmd), str(cmd.ext.get("clientId", ""))
    who = ctx.connections.sender(cmd.channel, named)
    if who is not None and not group:
        group = topic if topic in who.producer_groups else ",".join(sorted(who.producer_groups))
    if who is not None or named:  # a translated send names a client another broker may have heard
        client = f"{who.client_id if who is not None else named} at {client}"
    ctx.trace.sent(
        topic,
        queue_id,
        result.first_queue_offset + delta,
        result.first_offset,
        result.count,
        first_id,
        born_ms(record),
        (time.perf_counter() - started) * 1000,
        group,
        client,
    )


def _with_ids(body: bytes, count: int) -> tuple[bytes, bytes]:
    """A sent record that brought no client ids, with ``count`` the broker mints."""
    first = ids.mint(count)
    return with_first_id(body, first), first
