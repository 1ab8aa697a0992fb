"""The operator's look-ups behind ``Admin``: consumer groups with members and lag, messages by
key or id, and offset resets that running group consumers follow (mqadmin's consumerProgress,
queryMsgByKey, queryMsgById and resetOffsetByTime)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rocketspark.codec import ids
from rocketspark.errors import (
    InvalidParameterError,
    MessageNotFoundError,
    RocketSparkError,
    ServiceNotAvailableError,
)
from rocketspark.protocol.codec import pack, unpack
from rocketspark.protocol.codes import RequestCode, ResponseCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.group_topics import LOGICAL_PREFIX, split_progress_key
from rocketspark.protocol.types import Message, MessageExt, SendResult
from rocketspark.protocol.validation import topic_kind, validate_topic_name

if TYPE_CHECKING:
    from rocketspark.client.admin import Admin


@dataclass(frozen=True, slots=True)
class TopicInfo:
    """A topic as ``admin topics`` shows it (mqadmin topicList)."""

    name: str
    kind: str  # "normal", "static" or "system"
    queues: int  # logical queues
    brokers: tuple[str, ...]


def describe_topics(admin: Admin) -> list[TopicInfo]:
    """Every topic the nameservers know, sorted by name."""
    out = []
    for name in sorted(admin.topics()):
        try:
            route = admin.topic_route(name)
        except RocketSparkError:  # deleted between the list and its route
            continue
        out.append(
            TopicInfo(
                name,
                topic_kind(name, route.mapping is not None),
                len(admin.queues(name)),
                tuple(sorted({q.broker_name for q in route.queues})),
            )
        )
    return out


@dataclass(frozen=True, slots=True)
class GroupInfo:
    """A consumer group as ``admin groups`` shows it."""

    group: str
    topics: tuple[str, ...]  # topics it has committed progress on
    members: tuple[str, ...]  # client ids heard from lately, on any broker
    lag: int  # messages behind, over its topics (as consumer_progress counts)


def groups(admin: Admin) -> list[GroupInfo]:
    """Every group some broker keeps progress of or has members of, sorted by name."""
    topics: dict[str, set[str]] = {}
    members: dict[str, set[str]] = {}
    for address in admin.brokers().values():
        response = admin.call(address, RemotingCommand.request(RequestCode.GET_ALL_CONSUMER_OFFSET))
        body = unpack(response.body)
        for key in body["offsets"]:
            topic, group = split_progress_key(str(key))
            topics.setdefault(group, set()).add(topic.removeprefix(LOGICAL_PREFIX))
        for group, client_ids in body["members"].items():
            members.setdefault(group, set()).update(client_ids)
    out = []
    for group in sorted(set(topics) | set(members)):
        mine = sorted(topics.get(group, ()))
        lag = 0
        for topic in mine:
            try:
                lag += sum(p.lag for p in admin.consumer_progress(group, topic))
            except RocketSparkError:  # a topic deleted since: no lag to count
                continue
        out.append(GroupInfo(group, tuple(mine), tuple(sorted(members.get(group, ()))), lag))
    return out


def _messages(response: RemotingCommand) -> list[MessageExt]:
    if response.code == ResponseCode.QUERY_NOT_FOUND:
        return []
    return [MessageExt.from_wire(fields) for fields in unpack(response.body)["messages"]]


def query_messages(admin: Admin, topic: str, key: str, max_messages: int) -> list[MessageExt]:
    """The messages of ``topic`` carrying ``key``, newest first, from every broker that holds
    part of the topic (each looks the key up in its key index)."""
    validate_topic_name(topic)
    route = admin.topic_route(topic)
    found: list[MessageExt] = []
    for broker in sorted(route.brokers, key=lambda b: b.broker_name):
        ext = {"topic": topic, "key": key, "maxNum": max_messages}
        request = RemotingCommand.request(RequestCode.QUERY_MESSAGE, ext)
        found += _messages(admin.call(broker.address, request, None, ResponseCode.QUERY_NOT_FOUND))
    found.sort(key=lambda m: (m.store_timestamp, m.commitlog_offset, m.batch_index), reverse=True)
    return found[:max_messages]


def query_message_by_id(admin: Admin, msg_id: str) -> MessageExt:
    """The message with this id: its client id (``MessageExt.msg_id``, what a send returned,
    the Spark source's ``msgId``) or its offset id (``MessageExt.offset_msg_id``). An offset id
    names its broker's address and the message's position, and is asked of that broker; a
    client id is looked up in every broker's key index (a message stored more than once, by a
    producer's retry, is found as its oldest copy)."""
    text = msg_id.strip()
    if not text:
        raise InvalidParameterError(
            "a message id is required: MessageExt.msg_id (the id a send returned, the Spark source's msgId) or "
            "MessageExt.offset_msg_id"
        )
    cluster = admin.cluster_list()["brokers"]
    as_offset, why_not = _by_offset_id(admin, cluster, text)
    if as_offset is not None:
        return as_offset
    found, no_index = _by_client_id(admin, cluster, text)
    if found:
        return found[0]
    raise MessageNotFoundError(_not_found(text, why_not, no_index))


def _by_offset_id(admin: Admin, cluster: dict[str, Any], text: str) -> tuple[MessageExt | None, str]:
    """The message ``text`` names read as an offset id, or (None, why not)."""
    if not ids.is_offset_msg_id(text):
        return None, ""
    try:
        parsed = ids.parse_offset_msg_id(text)
    except InvalidParameterError:
        return None, ""
    host = bytes.fromhex(text)[:-8]
    for name, entry in sorted(cluster.items()):
        addresses = [a for a in (entry.get("addr"), *entry.get("replicas", ())) if a]
        address = next((a for a in addresses if ids.store_host(a) == host), None)
        if address is None:
            continue
        request = RemotingCommand.request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": parsed.physical})
        messages = _messages(admin.call(address, request, None, ResponseCode.QUERY_NOT_FOUND))
        if messages:
            return messages[0], ""
        return None, (
            f"read as an offset id it names physical offset {parsed.physical} of broker {name} ({parsed.address}), "
            "where no message is stored (retention may have deleted it)"
        )
    known = ", ".join(f"{n} ({e.get('addr') or 'no master'})" for n, e in sorted(cluster.items())) or "none"
    return None, f"read as an offset id it names {parsed.address}, which is no broker of this cluster ({known})"


def _by_client_id(admin: Admin, cluster: dict[str, Any], text: str) -> tuple[list[MessageExt], list[str]]:
    """The messages whose client id is ``text``, oldest first, from every broker's key index,
    and the brokers that keep none."""
    found: list[MessageExt] = []
    no_index: list[str] = []
    request = RemotingCommand.request(RequestCode.VIEW_MESSAGE_BY_ID, {"msgId": text})
    for name, entry in sorted(cluster.items()):
        address = entry.get("addr") or next(iter(entry.get("replicas", ())), None)
        if not address:
            continue
        try:
            found += _messages(admin.call(address, request, None, ResponseCode.QUERY_NOT_FOUND))
        except ServiceNotAvailableError:  # key_index_enable = false there
            no_index.append(name)
    found.sort(key=lambda m: (m.store_timestamp, m.broker_name, m.commitlog_offset, m.batch_index))
    return found, no_index


def _not_found(text: str, why_not_offset: str, no_index: list[str]) -> str:
    parts = [f"no message has id {text}: no broker's key index knows it as a client id (UNIQ_KEY)"]
    if no_index:
        parts.append(f"(brokers {', '.join(no_index)} keep no key index: key_index_enable = false)")
    if why_not_offset:
        parts.append(f"and {why_not_offset}")
    parts.append(
        "; ids are indexed within a second or so of the send. Use MessageExt.msg_id (the id a send returned, the "
        "Spark source's msgId) or MessageExt.offset_msg_id, of a message of this cluster"
    )
    return " ".join(parts).replace(" ;", ";")


def _next_reset_id(admin: Admin, group: str, topic: str, addresses: list[str]) -> int:
    """An id above every reset id the brokers at ``addresses`` know of (made there, or applied
    by a member): the time, unless an earlier admin's clock ran ahead of this one's (a lower id
    would be ignored by the group's members)."""
    known = [0]
    for address in addresses:
        request = RemotingCommand.request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": group})
        known.append(int((admin.call(address, request).ext.get("resetIds") or {}).get(topic, 0)))
    return max(time.time_ns(), max(known) + 1)


def reset_offsets(
    admin: Admin, group: str, topic: str, *, timestamp_ms: int | None, earliest: bool, latest: bool
) -> dict[int, int]:
    """Move ``group``'s progress on ``topic`` (every logical queue) to ``timestamp_ms``, the
    earliest or the latest offset; return queue -> new offset. Every broker is told first, so
    that the group's running consumers, which hear of it in their next heartbeat, move there
    too, and so that a commit of theirs from before the reset is dropped from then on; then the
    offsets are committed, for queues no consumer holds now."""
    if (timestamp_ms is not None) + earliest + latest != 1:
        raise InvalidParameterError("reset-offset takes exactly one of --timestamp, --earliest and --latest")
    validate_topic_name(topic)
    offsets: dict[int, int] = {}
    for queue in admin.queues(topic):
        q = queue.queue_id
        if earliest:
            offsets[q] = admin.min_offset(topic, q)
        elif latest:
            offsets[q] = admin.max_offset(topic, q)
        else:
            assert timestamp_ms is not None
            offsets[q] = admin.offset_for_timestamp(topic, q, timestamp_ms)
    addresses = list(admin.brokers().values())  # a member heartbeats every broker of its topics and retry topic
    version = _next_reset_id(admin, group, topic, addresses)
    body = pack({"version": version, "offsets": {str(q): o for q, o in offsets.items()}})
    for address in addresses:
        ext = {"consumerGroup": group, "topic": topic}
        admin.call(address, RemotingCommand.request(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, ext, body=body))
    for q, offset in offsets.items():
        admin.commit_offset(group, topic, q, offset)
    return offsets


def send_messages(
    admin: Admin, topic: str, body: bytes, *, count: int, tags: str | None, keys: list[str] | None
) -> list[SendResult]:
    """Send ``count`` test messages (numbered when more than one) to an existing topic, as the
    admin's user: a smoke test must not create a topic from a typo (mqadmin sendMessage)."""
    from rocketspark.client.producer import Producer

    if count < 1:
        raise InvalidParameterError(f"count must be at least 1, got {count}")
    validate_topic_name(topic)
    with admin.sibling(Producer, auto_create_topics=False, send_timeout_ms=admin.timeout_ms) as producer:
        return [
            producer.send(Message(topic, body if count == 1 else body + f" {i}".encode(), tags=tags, keys=keys))
            for i in range(count)
        ]


def consume_messages(
    admin: Admin, topic: str, *, count: int, new: bool, wait_s: float, tags: str | None
) -> list[MessageExt]:
    """Up to ``count`` messages of ``topic`` from every queue's first stored message (``new``:
    only those sent from now on), waiting at most ``wait_s`` for them; nothing is committed,
    so no group's progress moves (mqadmin consumeMessage)."""
    from rocketspark.client.consumer import Consumer

    if count < 1:
        raise InvalidParameterError(f"count must be at least 1, got {count}")
    found: list[MessageExt] = []
    with admin.sibling(Consumer, timeout_ms=admin.timeout_ms) as consumer:
        start = consumer.max_offset if new else consumer.min_offset
        offsets = {q.queue_id: start(topic, q.queue_id) for q in consumer.queues(topic)}
        deadline = time.monotonic() + wait_s
        while True:
            for queue_id, offset in offsets.items():
                result = consumer.pull(topic, queue_id, offset, count - len(found), tags=tags)
                found += result.messages[: count - len(found)]
                offsets[queue_id] = result.next_offset
                if len(found) >= count:
                    return found
            if time.monotonic() >= deadline:
                return found
            time.sleep(0.2)
