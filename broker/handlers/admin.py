"""Admin requests: topics (create, update, delete, list, stats), broker permission, counters.

Every change is persisted before the answer and re-registered with the nameservers at once,
so routes reflect it without waiting for the 30 s heartbeat.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol

from broker.ha.role import Role
from broker.longpoll import LongPollHub
from broker.offsets import ConsumerOffsets
from broker.registry import Registry
from broker.static_topics import StaticTopics
from broker.store.store import MessageStore
from broker.topics import TopicTable, validate_queue_nums
from rocketspark.errors import InvalidParameterError, TopicNotExistError
from rocketspark.protocol.bodies import pack
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.group_topics import LOGICAL_PREFIX
from rocketspark.protocol.headers import get_bool, get_int, get_str
from rocketspark.protocol.types import Perm, TopicConfig
from rocketspark.protocol.validation import validate_topic_name
from rocketspark.remoting.server import Dispatcher


class Counted(Protocol):
    """The broker's counters (:class:`broker.counters.BrokerCounters`): GET_COUNTERS' answer."""

    def to_wire(self) -> dict[str, Any]: ...


@dataclass(frozen=True, slots=True)
class AdminContext:
    """What the admin requests touch; ``runtime_info`` and ``set_permission`` are the broker's."""

    name: str
    role: Role
    topics: TopicTable
    static: StaticTopics
    store: MessageStore
    offsets: ConsumerOffsets
    longpoll: LongPollHub
    registry: Registry
    counters: Counted
    runtime_info: Callable[[], dict[str, Any]]
    set_permission: Callable[[int], None]


def register(dispatcher: Dispatcher, ctx: AdminContext) -> None:
    for code, handler in {
        RequestCode.UPDATE_AND_CREATE_TOPIC: create_topic,
        RequestCode.DELETE_TOPIC_IN_BROKER: delete_topic,
        RequestCode.GET_ALL_TOPIC_CONFIG: all_topics,
        RequestCode.GET_TOPIC_CONFIG: topic_config,
        RequestCode.GET_TOPIC_STATS_INFO: topic_stats,
        RequestCode.GET_BROKER_RUNTIME_INFO: runtime_info,
        RequestCode.GET_COUNTERS: counters,
        RequestCode.UPDATE_BROKER_CONFIG: update_broker_config,
    }.items():
        dispatcher.register(code, partial(handler, ctx))


async def create_topic(ctx: AdminContext, cmd: RemotingCommand) -> RemotingCommand:
    ctx.role.check_writable()  # only the group's master changes what its slaves copy
    topic = get_str(cmd, "topic")
    validate_topic_name(topic)
    write = get_int(cmd, "writeQueueNums", 8)
    read = get_int(cmd, "readQueueNums", write)
    perm = get_int(cmd, "perm", Perm.READ_WRITE)
    validate_queue_nums(read, write)
    if perm & ~(Perm.READ_WRITE | Perm.INHERIT):
        raise InvalidParameterError(f"perm {perm} is not a combination of 4 (read), 2 (write) and 1 (inherit)")
    if ctx.static.is_static(topic):
        raise InvalidParameterError(
            f'"{topic}" is a static topic: change its queues with remap_static_topic, not create_topic'
        )
    trace = get_bool(cmd, "trace", False)
    changed = ctx.topics.put(TopicConfig(topic, read, write, perm, trace), ctx.store.log_max_offset)
    if changed:
        await ctx.registry.register_now([topic], incremental=True)
    return cmd.response(ext={"changed": changed})


async def delete_topic(ctx: AdminContext, cmd: RemotingCommand) -> RemotingCommand:
    ctx.role.check_writable()  # only the group's master changes what its slaves copy
    topic = get_str(cmd, "topic")
    existed = ctx.topics.delete(topic)
    ctx.static.delete(topic)
    ctx.store.drop_topic(topic)
    ctx.offsets.drop_topic(topic)
    ctx.offsets.drop_topic(LOGICAL_PREFIX + topic)
    ctx.longpoll.notify_topic(topic)
    if existed:
        await ctx.registry.register_now([topic])
    return cmd.response(ext={"existed": existed})


async def all_topics(ctx: AdminContext, cmd: RemotingCommand) -> RemotingCommand:
    return cmd.response(body=pack([c.to_wire() for c in ctx.topics.configs()]))


async def topic_config(ctx: AdminContext, cmd: RemotingCommand) -> RemotingCommand:
    """The topic's config and, for a static topic, this broker's mapping detail."""
    topic = get_str(cmd, "topic")
    config = ctx.topics.get(topic)
    if config is None:
        raise TopicNotExistError(f'topic "{topic}" does not exist on broker {ctx.name}')
    detail = ctx.static.get(topic)
    return cmd.response(body=pack({"config": config.to_wire(), "mapping": detail.to_wire() if detail else None}))


async def topic_stats(ctx: AdminContext, cmd: RemotingCommand) -> RemotingCommand:
    """Per queue: min and max offset and when the newest message was stored."""
    topic = get_str(cmd, "topic")
    config = ctx.topics.check_readable(topic, 0)
    store = ctx.store
    rows = []
    for queue_id in range(max(config.read_queue_nums, config.write_queue_nums)):
        low, high = store.min_offset(topic, queue_id), store.max_offset(topic, queue_id)
        rows.append({"queueId": queue_id, "min": low, "max": high, "lastStoreMs": store.last_store_ms(topic, queue_id)})
    return cmd.response(body=pack(rows))


async def runtime_info(ctx: AdminContext, cmd: RemotingCommand) -> RemotingCommand:
    return cmd.response(body=pack(ctx.runtime_info()))


async def counters(ctx: AdminContext, cmd: RemotingCommand) -> RemotingCommand:
    return cmd.response(body=pack(ctx.counters.to_wire()))


async def update_broker_config(ctx: AdminContext, cmd: RemotingCommand) -> RemotingCommand:
    unknown = set(cmd.ext) - {"brokerPermission"}
    if unknown:
        raise InvalidParameterError(
            f"only brokerPermission can change at run time; {', '.join(sorted(unknown))} needs a config file edit "
            "and a restart"
        )
    perm = get_int(cmd, "brokerPermission")
    if perm & ~Perm.READ_WRITE:
        raise InvalidParameterError(f"brokerPermission {perm} must combine 4 (read) and 2 (write)")
    ctx.set_permission(perm)
    await ctx.registry.register_now()
    return cmd.response(ext={"brokerPermission": perm})
