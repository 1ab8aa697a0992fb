"""The console's message pages, as JSON-ready dictionaries: a topic's messages in a time range
(newest first, a page at a time, ``Admin.browse_messages``' cursor for the older ones), the
messages sent with a key, one message by either id with its body preview and trace timeline,
and a message resent to a group."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from rocketspark.client.browse import DEFAULT_LIMIT, MAX_LIMIT
from rocketspark.client.logical import queue_numbering
from rocketspark.console import trace_layout
from rocketspark.console.preview import preview
from rocketspark.errors import InvalidParameterError

if TYPE_CHECKING:
    from rocketspark.client.logical import LogicalQueue
    from rocketspark.protocol.trace import TraceEvent
    from rocketspark.protocol.types import MessageExt, SendResult

SNIPPET = 80  # characters of a body in a list row


class Page(Protocol):
    """One page of ``Admin.browse_messages``: messages newest first, and where older ones go on."""

    @property
    def messages(self) -> Sequence[MessageExt]: ...

    @property
    def cursor(self) -> str | None: ...


class MessageReader(Protocol):
    """What the message pages read and do (an ``Admin``)."""

    def queues(self, topic: str) -> list[LogicalQueue]: ...

    def browse_messages(
        self,
        topic: str,
        *,
        start_ms: int | None = None,
        end_ms: int | None = None,
        limit: int = 20,
        cursor: str | None = None,
    ) -> Page: ...

    def query_messages(self, topic: str, key: str) -> list[MessageExt]: ...

    def query_message_by_id(self, msg_id: str) -> MessageExt: ...

    def trace_of(self, message: MessageExt) -> list[TraceEvent]: ...

    def resend_message(self, msg_id: str, group: str) -> SendResult: ...


def page_limit(text: str | None) -> int:
    """The ``limit`` query parameter: messages per page (its range is ``browse_messages``'s)."""
    if text is None or text == "":
        return DEFAULT_LIMIT
    if not text.isdigit():
        raise InvalidParameterError(f"limit must be a number of messages from 1 to {MAX_LIMIT}, not {text!r}")
    return int(text)


def row(m: MessageExt, numbered: dict[tuple[str, int], int]) -> dict[str, Any]:
    """A message as a list row: its ids, place, tag, keys, times and the start of its body."""
    shown = preview(m.body)
    return {
        "msgId": m.msg_id,
        "offsetMsgId": m.offset_msg_id,
        "topic": m.topic,
        "queueId": numbered.get((m.broker_name, m.queue_id)),
        "queueOffset": m.queue_offset,
        "broker": m.broker_name,
        "tag": m.tags,
        "keys": m.keys,
        "bornMs": m.born_timestamp,
        "storeMs": m.store_timestamp,
        "bodyBytes": len(m.body),
        "snippet": shown["text"][:SNIPPET].replace("\n", " ") if shown["kind"] != "binary" else "(binary)",
    }


def browse(
    admin: MessageReader, topic: str, start_ms: int | None, end_ms: int | None, limit: int, cursor: str | None
) -> dict[str, Any]:
    """A page of ``topic``'s messages stored in [start_ms, end_ms), newest first; ``cursor``
    (from the previous page) goes on to older ones, null when there are none."""
    page = admin.browse_messages(topic, start_ms=start_ms, end_ms=end_ms, limit=limit, cursor=cursor)
    numbered = queue_numbering(admin, topic)
    return {"topic": topic, "messages": [row(m, numbered) for m in page.messages], "cursor": page.cursor}


def by_key(admin: MessageReader, topic: str, key: str) -> dict[str, Any]:
    """The messages of ``topic`` sent with ``key``, newest first (no paging: a key names few)."""
    numbered = queue_numbering(admin, topic)
    return {"topic": topic, "key": key, "messages": [row(m, numbered) for m in admin.query_messages(topic, key)]}


def message(admin: MessageReader, msg_id: str) -> dict[str, Any]:
    """The message with this id or offset id: where it is (the topic's queue id, null when its
    broker no longer serves the topic), its properties, body preview and trace timeline."""
    m = admin.query_message_by_id(msg_id)
    shown = row(m, queue_numbering(admin, m.topic))
    del shown["snippet"]
    trace = admin.trace_of(m)
    return {**shown, "properties": m.properties, "preview": preview(m.body), "trace": trace_layout.timeline(trace)}


def resend(admin: MessageReader, msg_id: str, group: str) -> dict[str, Any]:
    """A copy of the message to ``group``'s retry topic: that group's consumers get it again."""
    if not group:
        raise InvalidParameterError('resend needs "group": the consumer group to deliver the message to again')
    sent = admin.resend_message(msg_id, group)
    return {"group": group, "msgId": sent.msg_id, "topic": sent.topic, "broker": sent.broker_name}
