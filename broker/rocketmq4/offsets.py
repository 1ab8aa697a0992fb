"""A 4.x consumer's offsets: QUERY_CONSUMER_OFFSET, UPDATE_CONSUMER_OFFSET, GET_MAX_OFFSET,
GET_MIN_OFFSET and SEARCH_OFFSET_BY_TIMESTAMP, served as ours (a static topic's logical).

A group with no committed offset is answered QUERY_NOT_FOUND, which clients take as "none" and
then start where ``consumeFromWhere`` says. A negative commit is none: ali-ons commits an
offset of 0 as -1.
"""

from __future__ import annotations

from broker.rocketmq4.context import Dialect
from broker.rocketmq4.queues import client_labels
from rocketspark.protocol.codes import RequestCode, ResponseCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.rocketmq4.headers import Fields


async def handle_query(dialect: Dialect, request: RemotingCommand) -> RemotingCommand:
    fields = Fields("QUERY_CONSUMER_OFFSET", request.ext)
    group, topic, queue_id = fields.text("consumerGroup"), fields.text("topic"), fields.integer("queueId")
    offset = await dialect.queues.committed(group, topic, queue_id, request.user)
    if offset is None:
        if fields.flag("setZeroIfNotFound"):
            return request.response(ext={"offset": 0})
        return request.response(
            ResponseCode.QUERY_NOT_FOUND, remark=f"group {group} has no committed offset for {topic}/{queue_id}"
        )
    return request.response(ext={"offset": offset})


async def handle_update(dialect: Dialect, request: RemotingCommand) -> RemotingCommand:
    fields = Fields("UPDATE_CONSUMER_OFFSET", request.ext)
    group, topic, queue_id = fields.text("consumerGroup"), fields.text("topic"), fields.integer("queueId")
    offset = fields.integer("commitOffset")
    if offset >= 0:
        labels = client_labels(request, "consumerGroup", group)  # who acknowledged, for message trace
        await dialect.queues.commit(group, topic, queue_id, offset, request.user, labels)
    return request.response()


async def handle_bound(dialect: Dialect, request: RemotingCommand, *, code: int) -> RemotingCommand:
    """GET_MAX_OFFSET, GET_MIN_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP."""
    fields = Fields(RequestCode(code).name, request.ext)
    topic, queue_id = fields.text("topic"), fields.integer("queueId")
    extra: dict[str, object] = {}
    if code == RequestCode.SEARCH_OFFSET_BY_TIMESTAMP:
        extra["timestamp"] = fields.integer("timestamp")
    offset = await dialect.queues.offset(code, topic, queue_id, request.user, **extra)
    return request.response(ext={"offset": offset})
