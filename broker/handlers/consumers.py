"""Consumer heartbeats and group membership (what client-side rebalance is computed from).

A group's first heartbeat on a master also creates the group's retry and dead-letter topics
(``%RETRY%<group>``, ``%DLQ%<group>``, one queue each), as RocketMQ's broker does, and
registers them before answering: the group consumer that sent it may send a failed message
back at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from broker.connections import Connections
from broker.consumers import ConsumerGroups
from broker.ha.role import Role
from broker.handlers.connections import heard_ours
from broker.offsets import ConsumerOffsets
from broker.registry import Registry
from broker.store.store import MessageStore
from broker.topics import TopicTable
from rocketspark.errors import IllegalTopicNameError, InvalidParameterError
from rocketspark.protocol.bodies import pack, unpack
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.group_topics import dlq_topic, retry_topic
from rocketspark.protocol.headers import get_int, get_str
from rocketspark.protocol.types import Perm, TopicConfig
from rocketspark.protocol.validation import validate_topic_name
from rocketspark.remoting.server import Dispatcher


@dataclass
class ConsumersContext:
    groups: ConsumerGroups
    topics: TopicTable
    store: MessageStore
    role: Role
    registry: Registry
    offsets: ConsumerOffsets
    connections: Connections


async def ensure_group_topics(ctx: ConsumersContext, group: str) -> None:
    """The group's retry and dead-letter topics, on this master (registered when new)."""
    if not ctx.role.is_master:
        return  # a slave's topics are its master's
    created = []
    for name in (retry_topic(group), dlq_topic(group)):
        if ctx.topics.get(name) is None:
            try:
                validate_topic_name(name)
            except IllegalTopicNameError:
                return  # a group named outside RocketMQ's topic alphabet gets no retry topic
            ctx.topics.put(TopicConfig(name, 1, 1, Perm.READ_WRITE), ctx.store.log_max_offset)
            created.append(name)
    if created:
        await ctx.registry.register_shielded(created)


def register(dispatcher: Dispatcher, ctx: ConsumersContext) -> None:
    for code, handler in {
        RequestCode.GET_ALL_CONSUMER_OFFSET: all_offsets,
        RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: reset,
        RequestCode.HEART_BEAT: heartbeat,
        RequestCode.UNREGISTER_CLIENT: unregister,
        RequestCode.GET_CONSUMER_LIST_BY_GROUP: member_list,
        RequestCode.LOCK_BATCH_MQ: lock,
        RequestCode.UNLOCK_BATCH_MQ: unlock,
    }.items():
        dispatcher.register(code, partial(handler, ctx))


def _groups(cmd: RemotingCommand) -> tuple[str, str]:
    """(consumer group, producer group) of a HEART_BEAT or UNREGISTER_CLIENT: one at least."""
    consumer, producer = str(cmd.ext.get("consumerGroup") or ""), str(cmd.ext.get("producerGroup") or "")
    if not consumer and not producer:
        raise InvalidParameterError(
            "a client's HEART_BEAT or UNREGISTER_CLIENT names its consumerGroup or its producerGroup; it has neither"
        )
    return consumer, producer


async def heartbeat(ctx: ConsumersContext, cmd: RemotingCommand) -> RemotingCommand:
    """A member's heartbeat (answered with the group's members and resets), or a producer's
    announcement of its group; either one is noted in ``connections`` for operators."""
    group, producer = _groups(cmd)
    client_id = get_str(cmd, "clientId")
    heard_ours(ctx.connections, cmd, client_id, group, producer)
    if not group:
        return cmd.response()
    await ensure_group_topics(ctx, group)
    seen = cmd.ext.get("resetsSeen") or {}  # its shape was checked at the edge: MemberHeader
    ctx.groups.heartbeat(group, client_id, {str(t): int(v) for t, v in seen.items()})
    return cmd.response(ext={"members": ctx.groups.members(group), "resets": ctx.groups.resets_for(group)})


async def unregister(ctx: ConsumersContext, cmd: RemotingCommand) -> RemotingCommand:
    group, producer = _groups(cmd)
    client_id = get_str(cmd, "clientId")
    if cmd.channel is not None:  # else a 4.x client's, translated: its entry is the dialect's to change
        ctx.connections.leave(client_id, group or None, producer or None)
    if group:
        ctx.groups.unregister(group, client_id)
    return cmd.response()


async def member_list(ctx: ConsumersContext, cmd: RemotingCommand) -> RemotingCommand:
    group = get_str(cmd, "consumerGroup")
    return cmd.response(ext={"members": ctx.groups.members(group), "resetIds": ctx.groups.reset_ids(group)})


def _lock_key(cmd: RemotingCommand) -> tuple[str, str, int, str]:
    return get_str(cmd, "consumerGroup"), get_str(cmd, "topic"), get_int(cmd, "queueId"), get_str(cmd, "clientId")


async def lock(ctx: ConsumersContext, cmd: RemotingCommand) -> RemotingCommand:
    group, topic, queue_id, client_id = _lock_key(cmd)
    ctx.groups.heartbeat(group, client_id)  # asking for a lock is a sign of life too
    holder = ctx.groups.lock(group, topic, queue_id, client_id)
    return cmd.response(ext={"locked": holder == client_id, "holder": holder})


async def unlock(ctx: ConsumersContext, cmd: RemotingCommand) -> RemotingCommand:
    ctx.groups.unlock(*_lock_key(cmd))
    return cmd.response()


async def all_offsets(ctx: ConsumersContext, cmd: RemotingCommand) -> RemotingCommand:
    """Every group this broker keeps progress of, or has members of (mqadmin's
    consumerProgress with no group): offsets by "topic@group", and members by group."""
    offsets = {key: {str(q): o for q, o in queues.items()} for key, queues in ctx.offsets.table.items()}
    members = {group: ctx.groups.members(group) for group in list(ctx.groups.groups)}
    return cmd.response(body=pack({"offsets": offsets, "members": members}))


async def reset(ctx: ConsumersContext, cmd: RemotingCommand) -> RemotingCommand:
    body = unpack(cmd.body)  # its shape was checked at the edge: shapes.ResetOffsetBody
    offsets = {int(q): int(o) for q, o in body["offsets"].items()}
    ctx.groups.reset(get_str(cmd, "consumerGroup"), get_str(cmd, "topic"), int(body["version"]), offsets)
    return cmd.response()
