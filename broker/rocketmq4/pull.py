"""PULL_MESSAGE from 4.x consumers: long polling, tag and SQL92 filters, MessageExt records.

The request's flags (``PullSysFlag``): 1 commit ``commitOffset`` for the group first, 2 hold
the request while there is nothing new (``suspendTimeoutMillis``), 4 the request carries its
subscription (otherwise the group's, from its heartbeat). A pull answers at most
``maxMsgNums`` messages from the requested offset (we store batches; a batch that starts before
the offset or runs past the limit is cut, and ``nextBeginOffset`` says where to go on), with
RocketMQ's codes: SUCCESS, PULL_NOT_FOUND (nothing new), PULL_RETRY_IMMEDIATELY (everything
scanned was filtered out: go on at ``nextBeginOffset``), PULL_OFFSET_MOVED.
"""

from __future__ import annotations

from typing import Final

from broker.rocketmq4.context import Dialect
from broker.rocketmq4.members import Subscription
from broker.rocketmq4.messages import to_record
from broker.rocketmq4.queues import client_labels
from rocketspark.protocol.codes import RequestCode, ResponseCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.types import MessageExt
from rocketspark.rocketmq4 import records
from rocketspark.rocketmq4.headers import Fields

COMMIT_OFFSET: Final = 0x1
SUSPEND: Final = 0x2
SUBSCRIPTION: Final = 0x4
MAX_MESSAGES: Final = 1024
STATIC_SUSPEND_MS: Final = 2000  # a static topic's held pull ties up one of our client's threads


async def handle_pull(dialect: Dialect, request: RemotingCommand) -> RemotingCommand:
    fields = Fields("PULL_MESSAGE", request.ext)
    group, topic = fields.text("consumerGroup"), fields.text("topic")
    queue_id, offset = fields.integer("queueId"), fields.integer("queueOffset")
    max_messages = min(max(fields.integer("maxMsgNums", 32), 1), MAX_MESSAGES)
    sys_flag = fields.integer("sysFlag", 0)
    queues = dialect.queues
    queues.authorize(
        RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": group, "topic": topic, "queueId": queue_id}, request.user
    )
    commit_offset = fields.integer("commitOffset", -1)
    labels = client_labels(request, "consumerGroup", group, "4.x pull")
    if sys_flag & COMMIT_OFFSET and commit_offset >= 0:
        await queues.commit(group, topic, queue_id, commit_offset, request.user, labels)
    if sys_flag & SUBSCRIPTION:
        subscription = Subscription.of(topic, fields.text("subscription", "*"), fields.text("expressionType", "TAG"))
    else:
        subscription = dialect.members.subscription(group, topic) or Subscription(topic)
    matches = dialect.filters.matcher(subscription)
    suspend_ms = fields.integer("suspendTimeoutMillis", 0) if sys_flag & SUSPEND else 0
    if queues.is_static(topic):
        suspend_ms = min(suspend_ms, STATIC_SUSPEND_MS)
    sql = subscription.expression if matches is not None else None
    pulled = await queues.pull(
        topic, queue_id, offset, max_messages, subscription.tags, suspend_ms, request.user, sql, labels
    )
    request.held = pulled.held
    code, next_offset = pulled.code, pulled.next_offset
    messages: list[MessageExt] = pulled.messages
    if code == ResponseCode.SUCCESS:
        if matches is not None:
            messages = [m for m in messages if matches(m)]
        if len(messages) > max_messages:
            messages = messages[:max_messages]
            next_offset = messages[-1].queue_offset + 1
        if not messages:
            code = ResponseCode.PULL_RETRY_IMMEDIATELY
    body = b"".join(records.encode(to_record(m, queue_id, topic)) for m in messages)
    return request.response(
        code,
        ext={
            "nextBeginOffset": next_offset,
            "minOffset": pulled.min_offset,
            "maxOffset": pulled.max_offset,
            "suggestWhichBrokerId": 0,
        },
        body=body,
    )
