"""Queue offsets and consumer-group progress: min/max, search by time, commit and query.

GET_MIN_OFFSET / GET_MAX_OFFSET / SEARCH_OFFSET_BY_TIMESTAMP answer for one queue;
UPDATE_CONSUMER_OFFSET / QUERY_CONSUMER_OFFSET keep a group's progress per queue. A query for
a group that never committed answers QUERY_NOT_FOUND, a status the client turns into "none".
A commit that moves a traced queue's progress forward is recorded for message trace (the
acknowledgement of pull consumers, ``broker.trace``): one event per such commit request.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from broker.consumers import ConsumerGroups
from broker.ha.role import Role
from broker.offsets import ConsumerOffsets
from broker.static_topics import StaticTopics
from broker.store.store import MessageStore
from broker.topics import TopicTable
from broker.trace import TraceRecorder, client_of
from rocketspark.errors import InvalidParameterError
from rocketspark.protocol.codes import RequestCode, ResponseCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.group_topics import LOGICAL_PREFIX
from rocketspark.protocol.headers import get_bool, get_int, get_str
from rocketspark.protocol.validation import validate_topic_name
from rocketspark.remoting.server import Dispatcher


@dataclass(frozen=True, slots=True)
class OffsetsContext:
    """What offset queries and commits touch."""

    topics: TopicTable
    store: MessageStore
    offsets: ConsumerOffsets
    role: Role
    static: StaticTopics
    groups: ConsumerGroups
    trace: TraceRecorder


def register(dispatcher: Dispatcher, ctx: OffsetsContext) -> None:
    for code, handler in {
        RequestCode.GET_MAX_OFFSET: max_offset,
        RequestCode.GET_MIN_OFFSET: min_offset,
        RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: search_by_time,
        RequestCode.UPDATE_CONSUMER_OFFSET: update_consumer_offset,
        RequestCode.QUERY_CONSUMER_OFFSET: query_consumer_offset,
    }.items():
        dispatcher.register(code, partial(handler, ctx))


async def max_offset(ctx: OffsetsContext, cmd: RemotingCommand) -> RemotingCommand:
    topic, queue_id = get_str(cmd, "topic"), get_int(cmd, "queueId")
    ctx.topics.check_readable(topic, queue_id)
    return cmd.response(ext={"offset": ctx.store.max_offset(topic, queue_id)})


async def min_offset(ctx: OffsetsContext, cmd: RemotingCommand) -> RemotingCommand:
    topic, queue_id = get_str(cmd, "topic"), get_int(cmd, "queueId")
    ctx.topics.check_readable(topic, queue_id)
    return cmd.response(ext={"offset": ctx.store.min_offset(topic, queue_id)})


async def search_by_time(ctx: OffsetsContext, cmd: RemotingCommand) -> RemotingCommand:
    topic, queue_id = get_str(cmd, "topic"), get_int(cmd, "queueId")
    ctx.topics.check_readable(topic, queue_id)
    timestamp = get_int(cmd, "timestamp")
    return cmd.response(ext={"offset": ctx.store.offset_for_time(topic, queue_id, timestamp)})


async def update_consumer_offset(ctx: OffsetsContext, cmd: RemotingCommand) -> RemotingCommand:
    group, topic = get_str(cmd, "consumerGroup"), get_str(cmd, "topic")
    queue_id, offset = get_int(cmd, "queueId"), get_int(cmd, "commitOffset")
    ctx.role.check_writable()  # progress lives on the master; its slaves copy it
    if offset < 0:
        raise InvalidParameterError(f"commit offset must be >= 0, got {offset}")
    applied = get_int(cmd, "resetVersion", -1)
    if 0 <= applied < ctx.groups.reset_version(group, topic):
        # a group consumer's progress from before an admin reset it has not applied yet:
        # dropped, or it would undo the reset (it commits the reset offset once it moves)
        return cmd.response(ext={"dropped": True})
    if get_bool(cmd, "logical", False):
        validate_topic_name(topic)  # not checked against the topic table below
        # A static topic's progress is kept by logical queue, on the broker leading the
        # queue (a client with a stale route is told to refresh it: a commit left on an
        # older leader would hide behind the new one's); readers look back through the
        # segments' brokers for progress committed before a remap.
        ctx.static.leader_for_send(topic, queue_id, get_int(cmd, "epoch", -1))
        ctx.offsets.commit(group, LOGICAL_PREFIX + topic, queue_id, offset)
        return cmd.response()
    config = ctx.topics.check_readable(topic, queue_id)
    if ctx.trace.traced(config):  # forward only: a periodic commit of the same offset says nothing new
        previous = ctx.offsets.query(group, topic, queue_id)
        if previous is None or offset > previous:
            ctx.trace.committed(topic, queue_id, group, offset, client_of(cmd))
    ctx.offsets.commit(group, topic, queue_id, offset)
    return cmd.response()


async def query_consumer_offset(ctx: OffsetsContext, cmd: RemotingCommand) -> RemotingCommand:
    group, topic, queue_id = get_str(cmd, "consumerGroup"), get_str(cmd, "topic"), get_int(cmd, "queueId")
    key = LOGICAL_PREFIX + topic if get_bool(cmd, "logical", False) else topic
    offset = ctx.offsets.query(group, key, queue_id)
    if offset is None:
        return cmd.response(ResponseCode.QUERY_NOT_FOUND, remark=f"group {group} has no offset for {topic}/{queue_id}")
    return cmd.response(ext={"offset": offset})
