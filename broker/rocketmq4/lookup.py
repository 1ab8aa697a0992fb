"""QUERY_MESSAGE and VIEW_MESSAGE_BY_ID from RocketMQ's tools and clients (mqadmin queryMsgByKey,
queryMsgById, queryMsgByUniqueKey; the Dashboard), answered with MessageExt records.

VIEW_MESSAGE_BY_ID names a physical offset (from an offset message id): the record whose bytes
hold it is found (``broker.store.locate``) and the message at that place is read through our
own lookup. QUERY_MESSAGE finds messages by key, or by client id when ``_UNIQUE_KEY_QUERY`` says
the key is one; the client filters what it gets once more, as RocketMQ's does.
"""

from __future__ import annotations

import asyncio

from broker.rocketmq4.context import Dialect
from broker.rocketmq4.messages import to_record
from broker.store.locate import locate
from rocketspark.protocol.codec import unpack
from rocketspark.protocol.codes import RequestCode, ResponseCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.types import MessageExt
from rocketspark.rocketmq4 import records
from rocketspark.rocketmq4.headers import Fields


def _messages(answer: RemotingCommand) -> list[MessageExt]:
    if answer.code != ResponseCode.SUCCESS:
        return []
    return [MessageExt(*fields) for fields in unpack(answer.body)["messages"]]


def _records(dialect: Dialect, messages: list[MessageExt]) -> bytes:
    return b"".join(records.encode(to_record(m, dialect.host_of(m.broker_name))) for m in messages)


async def handle_view(dialect: Dialect, request: RemotingCommand) -> RemotingCommand:
    fields = Fields("VIEW_MESSAGE_BY_ID", request.ext)
    physical = fields.integer("offset")
    topic = fields.text("topic", "")
    found = await asyncio.to_thread(locate, dialect.store, physical, [topic] if topic else None)
    if found is None:
        return request.response(
            ResponseCode.QUERY_NOT_FOUND,
            remark=f"no message at physical offset {physical} on broker {dialect.name} (deleted by retention, or an "
            "id of another broker)",
        )
    ours: dict[str, object] = {"offset": found.record_offset, "index": found.place}
    messages = _messages(await dialect.queues.ours(RequestCode.VIEW_MESSAGE_BY_ID, ours, request.user))
    if not messages:
        return request.response(ResponseCode.QUERY_NOT_FOUND, remark=f"no message at physical offset {physical}")
    return request.response(body=_records(dialect, messages[:1]))


async def handle_query(dialect: Dialect, request: RemotingCommand) -> RemotingCommand:
    fields = Fields("QUERY_MESSAGE", request.ext)
    topic, key = fields.text("topic"), fields.text("key")
    ours = {"topic": topic, "key": key, "maxNum": fields.integer("maxNum", 32)}
    messages = _messages(await dialect.queues.ours(RequestCode.QUERY_MESSAGE, ours, request.user))
    if not messages:
        return request.response(ResponseCode.QUERY_NOT_FOUND, remark=f"no message of {topic} with key {key!r} here")
    begin, end = fields.integer("beginTimestamp", 0), fields.integer("endTimestamp", 0) or None
    kept = [m for m in messages if m.store_timestamp >= begin and (end is None or m.store_timestamp <= end)]
    return request.response(
        ext={
            "indexLastUpdateTimestamp": max((m.store_timestamp for m in kept), default=0),
            "indexLastUpdatePhyoffset": 0,
        },
        body=_records(dialect, kept),
    )
