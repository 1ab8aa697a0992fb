"""QUERY_MESSAGE and VIEW_MESSAGE_BY_ID from RocketMQ's tools and clients (mqadmin queryMsgByKey,
queryMsgById, queryMsgByUniqueKey; the Dashboard), answered with MessageExt records.

Both are ours underneath: VIEW_MESSAGE_BY_ID names a physical offset (from an offset message
id), which our VIEW_MESSAGE_BY_ID finds the record of; QUERY_MESSAGE finds messages by key, or
by client id when ``_UNIQUE_KEY_QUERY`` says the key is one (our VIEW_MESSAGE_BY_ID by
``msgId``: the key index's id ranges). The client filters what it gets once more, as
RocketMQ's does.
"""

from __future__ import annotations

from broker.rocketmq4.context import Dialect
from broker.rocketmq4.messages import to_record
from rocketspark.protocol.bodies import unpack
from rocketspark.protocol.codes import RequestCode, ResponseCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.types import MessageExt
from rocketspark.rocketmq4 import records
from rocketspark.rocketmq4.headers import Fields


def messages_of(answer: RemotingCommand) -> list[MessageExt]:
    """The messages our lookup answered (none for QUERY_NOT_FOUND)."""
    if answer.code != ResponseCode.SUCCESS or not answer.body:
        return []
    return [MessageExt.from_wire(fields) for fields in unpack(answer.body)["messages"]]


def _records(messages: list[MessageExt]) -> bytes:
    return b"".join(records.encode(to_record(m)) for m in messages)


async def handle_view(dialect: Dialect, request: RemotingCommand) -> RemotingCommand:
    physical = Fields("VIEW_MESSAGE_BY_ID", request.ext).integer("offset")
    messages = messages_of(
        await dialect.queues.ours(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": physical}, request.user)
    )
    if not messages:
        return request.response(
            ResponseCode.QUERY_NOT_FOUND,
            remark=f"no message at physical offset {physical} on broker {dialect.name} (deleted by retention, or an "
            "id of another broker)",
        )
    return request.response(body=_records(messages[:1]))


async def handle_query(dialect: Dialect, request: RemotingCommand) -> RemotingCommand:
    fields = Fields("QUERY_MESSAGE", request.ext)
    topic, key = fields.text("topic"), fields.text("key")
    limit = fields.integer("maxNum", 32)
    if fields.flag("_UNIQUE_KEY_QUERY"):
        ours: dict[str, object] = {"msgId": key, "maxNum": limit}
        found = messages_of(await dialect.queues.ours(RequestCode.VIEW_MESSAGE_BY_ID, ours, request.user))
        messages = [m for m in found if m.topic == topic]
    else:
        ours = {"topic": topic, "key": key, "maxNum": limit}
        messages = messages_of(await dialect.queues.ours(RequestCode.QUERY_MESSAGE, ours, request.user))
    begin, end = fields.integer("beginTimestamp", 0), fields.integer("endTimestamp", 0) or None
    kept = [m for m in messages if m.store_timestamp >= begin and (end is None or m.store_timestamp <= end)]
    if not kept:
        return request.response(ResponseCode.QUERY_NOT_FOUND, remark=f"no message of {topic} with key {key!r} here")
    return request.response(
        ext={"indexLastUpdateTimestamp": max(m.store_timestamp for m in kept), "indexLastUpdatePhyoffset": 0},
        body=_records(kept),
    )
