"""Finding stored messages: by key (QUERY_MESSAGE, through the key index) and by id
(VIEW_MESSAGE_BY_ID): by ``offset``, the physical offset an offset id names (RocketMQ's field:
the record holding it is found in the log, ``store.locate``), or by ``msgId``, a client id
(the key index's batch ranges and its messages' own ``UNIQ_KEY``s, ``codec.ids``).

Both answer with the messages themselves, as the consumer sees them (a static topic's with
their logical queue and offset): the body is ``{"messages": [MessageExt fields, ...]}``. An
index row is only a candidate: the record is read back and the message kept only if it really
carries the key, or the id.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np

from broker.static_topics import StaticTopics
from broker.store.keyindex import KeyIndex
from broker.store.store import MessageStore
from broker.topics import TopicTable
from rocketspark.codec import ids
from rocketspark.codec.columns import decode
from rocketspark.codec.layout import PREFIX, RecordCorrupted
from rocketspark.codec.messages import to_messages
from rocketspark.errors import InvalidParameterError, ServiceNotAvailableError
from rocketspark.protocol.bodies import pack
from rocketspark.protocol.codes import RequestCode, ResponseCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.headers import get_int, get_str
from rocketspark.protocol.types import MessageExt
from rocketspark.protocol.validation import validate_topic_name
from rocketspark.remoting.server import Dispatcher

MAX_QUERY_MESSAGES = 1000


@dataclass(frozen=True, slots=True)
class LookupContext:
    name: str
    topics: TopicTable
    static: StaticTopics
    store: MessageStore
    keys: KeyIndex | None
    address: Callable[[], str]  # this broker's advertised host:port, as offset ids name it


def register(dispatcher: Dispatcher, ctx: LookupContext) -> None:
    dispatcher.register(RequestCode.QUERY_MESSAGE, partial(query_by_key, ctx))
    dispatcher.register(RequestCode.VIEW_MESSAGE_BY_ID, partial(view_by_id, ctx))


def _answer(cmd: RemotingCommand, messages: list[MessageExt]) -> RemotingCommand:
    if not messages:
        return cmd.response(ResponseCode.QUERY_NOT_FOUND, remark="no such message on this broker")
    return cmd.response(body=pack({"messages": [list(m) for m in messages]}))


async def query_by_key(ctx: LookupContext, cmd: RemotingCommand) -> RemotingCommand:
    topic, key = get_str(cmd, "topic"), get_str(cmd, "key")
    validate_topic_name(topic)
    limit = min(max(get_int(cmd, "maxNum", 32), 1), MAX_QUERY_MESSAGES)
    if ctx.keys is None:
        raise ServiceNotAvailableError(
            f"broker {ctx.name} keeps no key index (key_index_enable = false); look messages up by id instead"
        )
    keys = ctx.keys
    return _answer(cmd, await asyncio.to_thread(_find, ctx, keys, topic, key, limit))


def _find(ctx: LookupContext, keys: KeyIndex, topic: str, key: str, limit: int) -> list[MessageExt]:
    """The messages the index names that really carry ``key`` (read in a thread: SQLite and the
    log are read from disk), each record decoded once. More candidates than ``limit`` are read,
    since rows of cut or damaged records fall out here."""
    by_record: dict[int, list[int]] = {}
    for hit in keys.lookup(topic, key, 2 * limit + 16):
        by_record.setdefault(hit.phys, []).append(hit.index)
    found = []
    for phys, indexes in by_record.items():
        for message in _messages_at(ctx, phys, indexes):
            if message.topic == topic and key in message.keys:
                found.append(message)
    found.sort(key=lambda m: (m.commitlog_offset, m.batch_index), reverse=True)
    return found[:limit]


async def view_by_id(ctx: LookupContext, cmd: RemotingCommand) -> RemotingCommand:
    physical, text = get_int(cmd, "offset", -1), get_str(cmd, "msgId", "")
    if (physical >= 0) == bool(text):
        raise InvalidParameterError(
            "VIEW_MESSAGE_BY_ID takes one of offset (the physical offset an offset id names) and msgId (a client id)"
        )
    if physical >= 0:
        return _answer(cmd, await asyncio.to_thread(message_at, ctx, physical))
    if ctx.keys is None:
        raise ServiceNotAvailableError(
            f"broker {ctx.name} keeps no key index (key_index_enable = false), which finds messages by client id; "
            "find the message by its offset id (MessageExt.offset_msg_id) instead"
        )
    limit = min(max(get_int(cmd, "maxNum", 32), 1), MAX_QUERY_MESSAGES)
    return _answer(cmd, await asyncio.to_thread(find_by_client_id, ctx, ctx.keys, text, limit))


def message_at(ctx: LookupContext, physical: int) -> list[MessageExt]:
    """The message at ``physical`` (the position its offset id names), if one is stored there."""
    found = ctx.store.record_holding(physical)
    if found is None:
        return []
    return _decoded(ctx, found.record, [found.place])


def find_by_client_id(ctx: LookupContext, keys: KeyIndex, text: str, limit: int) -> list[MessageExt]:
    """The messages whose client id is ``text`` (a resent message may be stored more than
    once), oldest first: candidates from the key index, each read back and kept only if its
    id really is ``text`` (compared as our producers' bytes when it has their layout, so
    either case finds it, else as the string its producer gave)."""
    first = ids.parse_client_id(text)
    by_record: dict[int, list[int]] = {}
    for hit in keys.lookup_id(first, text, 2 * limit + 16):
        by_record.setdefault(hit.phys, []).append(hit.index)
    found = []
    for phys, indexes in sorted(by_record.items()):
        for message in _messages_at(ctx, phys, indexes):
            client_id = message.client_id
            if client_id == text or (first is not None and client_id is not None and client_id == text.upper()):
                found.append(message)
    return found[:limit]


def _messages_at(ctx: LookupContext, phys: int, indexes: list[int]) -> list[MessageExt]:
    """The messages at ``indexes`` of the record at log offset ``phys``; none when no intact
    record starts there (deleted by retention, or an offset no record starts at)."""
    head = ctx.store.read_record(phys, PREFIX.size)
    if head is None:
        return []
    size, _magic = PREFIX.unpack(head)
    raw = ctx.store.read_record(phys, size) if PREFIX.size <= size <= ctx.store.config.max_record_bytes else None
    if raw is None:
        return []
    return _decoded(ctx, raw, indexes)


def _decoded(ctx: LookupContext, raw: bytes, indexes: list[int]) -> list[MessageExt]:
    """The messages at ``indexes`` of the record ``raw``, if it is one."""
    try:
        columns = decode(raw)  # the CRC proves a record starts here
    except RecordCorrupted:
        return []
    at = int(columns.heads.topic_at[0])
    topic = raw[at : at + int(columns.heads.rows["topic_len"][0])].decode()
    wanted = np.isin(columns.index, np.array(indexes, dtype=np.int64))
    host = ids.store_host(ctx.address())
    return [_logical(ctx, m) for m in to_messages(columns.take(wanted), topic, ctx.name, host)]  # those alone


def _logical(ctx: LookupContext, message: MessageExt) -> MessageExt:
    """A static topic's message relabelled with its logical queue and offset."""
    detail = ctx.static.get(message.topic)
    if detail is None:
        return message
    for logical_id, items in detail.hosted_queues.items():
        for item in items:
            if item.bname != ctx.name or item.queue_id != message.queue_id:
                continue
            end = item.end_offset if item.sealed else None
            if item.start_offset <= message.queue_offset and (end is None or message.queue_offset < end):
                fields = list(message)
                fields[1], fields[2] = logical_id, item.logical(message.queue_offset)
                return MessageExt(*fields)
    return message
