"""Messages for the operator: by key, by id, and a smoke test's send and read (mqadmin's
queryMsgByKey, queryMsgById, sendMessage and consumeMessage).

On its own::

    from rocketspark.client.admin_core import AdminConnection
    from rocketspark.client.message_admin import Messages

    with AdminConnection("127.0.0.1:9876") as connection:
        messages = Messages(connection)
        sent = messages.send("orders", b"hello", keys=["order-1"])
        print(messages.by_id(sent[0].offset_msg_id))  # a client id: once indexed, a second on
"""

from __future__ import annotations

import time
from typing import Any, Final

from rocketspark.client.admin_core import ClientCore
from rocketspark.codec import ids
from rocketspark.errors import InvalidParameterError, MessageNotFoundError, ServiceNotAvailableError
from rocketspark.protocol.bodies import unpack
from rocketspark.protocol.codes import RequestCode, ResponseCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.types import Message, MessageExt, SendResult
from rocketspark.protocol.validation import validate_topic_name

# The smoke tests' and the key query's defaults (the CLI's too).
SEND_COUNT: Final = 1
CONSUME_COUNT: Final = 10
CONSUME_WAIT_S: Final = 3.0
QUERY_MAX_MESSAGES: Final = 32


def _messages(response: RemotingCommand) -> list[MessageExt]:
    if response.code == ResponseCode.QUERY_NOT_FOUND:
        return []
    return [MessageExt.from_wire(fields) for fields in unpack(response.body)["messages"]]


def query_messages(core: ClientCore, topic: str, key: str, max_messages: int) -> list[MessageExt]:
    """The messages of ``topic`` carrying ``key``, newest first, from every broker that holds
    part of the topic (each looks the key up in its key index)."""
    validate_topic_name(topic)
    route = core.topic_route(topic)
    found: list[MessageExt] = []
    for broker in sorted(route.brokers, key=lambda b: b.broker_name):
        ext = {"topic": topic, "key": key, "maxNum": max_messages}
        request = RemotingCommand.request(RequestCode.QUERY_MESSAGE, ext)
        found += _messages(core.call(broker.address, request, None, ResponseCode.QUERY_NOT_FOUND))
    found.sort(key=lambda m: (m.store_timestamp, m.commitlog_offset, m.batch_index), reverse=True)
    return found[:max_messages]


def query_message_by_id(core: ClientCore, msg_id: str) -> MessageExt:
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
    cluster = core.cluster_list()["brokers"]
    as_offset, why_not = _by_offset_id(core, cluster, text)
    if as_offset is not None:
        return as_offset
    found, no_index = _by_client_id(core, cluster, text)
    if found:
        return found[0]
    raise MessageNotFoundError(_not_found(text, why_not, no_index))


def _by_offset_id(core: ClientCore, cluster: dict[str, Any], text: str) -> tuple[MessageExt | None, str]:
    """The message ``text`` names read as an offset id, or (None, why not)."""
    try:
        parsed = ids.parse_offset_msg_id(text)
    except InvalidParameterError:
        return None, ""
    host = parsed.store_host
    for name, entry in sorted(cluster.items()):
        addresses = [a for a in (entry.get("addr"), *entry.get("replicas", ())) if a]
        address = next((a for a in addresses if ids.store_host(a) == host), None)
        if address is None:
            continue
        request = RemotingCommand.request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": parsed.physical})
        messages = _messages(core.call(address, request, None, ResponseCode.QUERY_NOT_FOUND))
        if messages:
            return messages[0], ""
        return None, (
            f"read as an offset id it names physical offset {parsed.physical} of broker {name} ({parsed.address}), "
            "where no message is stored (retention may have deleted it)"
        )
    known = ", ".join(f"{n} ({e.get('addr') or 'no master'})" for n, e in sorted(cluster.items())) or "none"
    return None, f"read as an offset id it names {parsed.address}, which is no broker of this cluster ({known})"


def _by_client_id(core: ClientCore, cluster: dict[str, Any], text: str) -> tuple[list[MessageExt], list[str]]:
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
            found += _messages(core.call(address, request, None, ResponseCode.QUERY_NOT_FOUND))
        except ServiceNotAvailableError:  # key_index_enable = false there
            no_index.append(name)
    found.sort(key=lambda m: (m.store_timestamp, m.broker_name, m.commitlog_offset, m.batch_index))
    return found, no_index


def copies_of(core: ClientCore, message: MessageExt, brokers: dict[str, Any]) -> list[MessageExt]:
    """``message`` and every other stored message with its client id, oldest first: the copies
    a group's failures sent to its retry and dead-letter topics, a producer's resend.
    ``brokers``: the cluster list's brokers, which the caller has at hand."""
    found, _ = _by_client_id(core, brokers, message.msg_id) if message.msg_id else ([], [])
    place = (message.broker_name, message.commitlog_offset, message.batch_index)
    others = [m for m in found if (m.broker_name, m.commitlog_offset, m.batch_index) != place]
    return [message, *others]


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


def send_messages(
    core: ClientCore, topic: str, body: bytes, *, count: int, tags: str | None, keys: list[str] | None
) -> list[SendResult]:
    """Send ``count`` test messages (numbered when more than one) to an existing topic, as the
    admin's user: a smoke test must not create a topic from a typo (mqadmin sendMessage)."""
    from rocketspark.client.producer import Producer

    if count < 1:
        raise InvalidParameterError(f"count must be at least 1, got {count}")
    validate_topic_name(topic)
    with core.sibling(Producer, auto_create_topics=False, send_timeout_ms=core.timeout_ms) as producer:
        return [
            producer.send(Message(topic, body if count == 1 else body + f" {i}".encode(), tags=tags, keys=keys))
            for i in range(count)
        ]


def consume_messages(
    core: ClientCore, topic: str, *, count: int, new: bool, wait_s: float, tags: str | None
) -> list[MessageExt]:
    """Up to ``count`` messages of ``topic`` from every queue's first stored message (``new``:
    only those sent from now on), waiting at most ``wait_s`` for them; nothing is committed,
    so no group's progress moves (mqadmin consumeMessage)."""
    from rocketspark.client.consumer import Consumer

    if count < 1:
        raise InvalidParameterError(f"count must be at least 1, got {count}")
    found: list[MessageExt] = []
    with core.sibling(Consumer, timeout_ms=core.timeout_ms) as consumer:
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


class Messages:
    """The cluster's messages, found by key or id; test messages sent and read."""

    def __init__(self, core: ClientCore) -> None:
        self.core = core

    def query(self, topic: str, key: str, *, max_messages: int = QUERY_MAX_MESSAGES) -> list[MessageExt]:
        """The messages of ``topic`` sent with ``key`` (the brokers' key index), newest first."""
        return query_messages(self.core, topic, key, max_messages)

    def by_id(self, msg_id: str) -> MessageExt:
        """The message with this id: its client id (``MessageExt.msg_id``, ``SendResult.msg_id``,
        the Spark source's ``msgId``; found through the brokers' key indexes) or its offset id
        (``MessageExt.offset_msg_id``: it names its broker and position). MessageNotFoundError
        says why neither found it."""
        return query_message_by_id(self.core, msg_id)

    def send(
        self,
        topic: str,
        body: bytes,
        *,
        count: int = SEND_COUNT,
        tags: str | None = None,
        keys: list[str] | None = None,
    ) -> list[SendResult]:
        """Smoke test: send ``count`` messages (numbered if several) to an existing topic."""
        return send_messages(self.core, topic, body, count=count, tags=tags, keys=keys)

    def consume(
        self,
        topic: str,
        *,
        count: int = CONSUME_COUNT,
        new: bool = False,
        wait_s: float = CONSUME_WAIT_S,
        tags: str | None = None,
    ) -> list[MessageExt]:
        """Smoke test: read up to ``count`` messages without committing anything."""
        return consume_messages(self.core, topic, count=count, new=new, wait_s=wait_s, tags=tags)
