"""Message trace as stored: one trace message per event, in the system topic
``RMQ_SYS_TRACE_TOPIC`` of the broker that saw it (:mod:`broker.trace` records them), and the
rows ``Admin.message_trace`` answers with.

A trace message's body is one JSON object named after the fields of RocketMQ's ``TraceBean``
and ``TraceContext`` where they fit (``traceType``, ``timeStamp``, ``groupName``, ``topic``,
``msgId``, ``clientHost``, ``costTime``, ``isSuccess``, ``storeTime``, ``bornTime``), plus ours: the event
covers one stored batch record (``broker`` and ``recordOffset``, its log offset) and, of its
messages, ``count`` from place ``index``. Its key (``record_key``) names that record, so the
broker's key index finds every event of a record at once. ``traceType`` is RocketMQ's ``Pub``
(sent and stored), ``SubBefore`` (delivered to a group), or one of ours for what RocketMQ's
client-side trace has no type for, among them ``Commit``: a group committed a queue's offset
(``commitOffset``), which acknowledges the messages before it; it is about a queue, not a record,
and is keyed by queue, group and minute (``commit_key``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final, Protocol

from rocketspark.protocol.types import MessageExt

TRACE_TOPIC: Final = "RMQ_SYS_TRACE_TOPIC"  # RocketMQ's TopicValidator.RMQ_SYS_TRACE_TOPIC

READ_AHEAD: Final = "v2 read-ahead"  # a pull's ``via`` that is no delivery (the v2 endpoint traces its own)
BROWSE: Final = "browse"  # an admin's look at a topic's messages (Admin.browse_messages): no delivery either
NO_DELIVERY: Final = frozenset({READ_AHEAD, BROWSE})  # the pulls' ``via`` values the trace leaves out
PUB: Final = "Pub"  # a record sent and stored
SUB_BEFORE: Final = "SubBefore"  # a record delivered to a consumer (group)
COMMIT: Final = "Commit"  # a group committed a queue's offset (pull consumers' acknowledgement)
COMMIT_BUCKET_MS: Final = 60_000  # the span of time one commit key covers
ACKNOWLEDGED: Final = "acknowledged (committed)"  # the event a commit past a message's offset gives it


class Tracer(Protocol):
    """What a broker's request handlers (the 4.x dialect's, the v2 endpoint's) record for
    message trace beyond sends and pulls (``broker.trace.TraceRecorder``)."""

    def traced_topic(self, topic: str) -> bool: ...

    def noted(self, kind: str, message: MessageExt, group: str, client: str, detail: str) -> None: ...


def record_key(broker: str, record_offset: int) -> str:
    """The key of every trace message of the record at ``record_offset`` of ``broker``'s log."""
    return f"{broker}@{record_offset}"


def commit_key(broker: str, topic: str, queue_id: int, group: str, time_ms: int) -> str:
    """The key of the commits of ``group`` on a queue of ``broker`` in the minute of ``time_ms``."""
    return f"commit:{broker}@{topic}@{queue_id}@{group}@{time_ms // COMMIT_BUCKET_MS}"


def encode_event(fields: dict[str, Any]) -> bytes:
    return json.dumps(fields, separators=(",", ":")).encode()


@dataclass(frozen=True, slots=True)
class TraceEvent:
    """One step of a message's life, as ``Admin.message_trace`` returns it (in time order).

    ``event``: ``sent`` (the producer built it: its clock), ``stored`` (the broker stored it:
    queue, offset, how long the send took on the broker), ``delivered`` (a pull answered it to
    ``group``/``client``). ``detail`` holds what else the event says."""

    time_ms: int
    event: str
    broker: str
    topic: str
    queue_id: int
    queue_offset: int
    group: str
    client: str
    cost_ms: float | None
    detail: str

    def to_json(self) -> dict[str, Any]:
        return {
            "timeMs": self.time_ms,
            "event": self.event,
            "broker": self.broker,
            "topic": self.topic,
            "queueId": self.queue_id,
            "queueOffset": self.queue_offset,
            "group": self.group,
            "client": self.client,
            "costMs": self.cost_ms,
            "detail": self.detail,
        }


def covers(fields: dict[str, Any], batch_index: int) -> bool:
    """Whether the event ``fields`` (a decoded trace body) is about the message at place
    ``batch_index`` of its record."""
    first = int(fields.get("index", 0))
    return first <= batch_index < first + int(fields.get("count", 1))


def events_of(fields: dict[str, Any], batch_index: int) -> list[TraceEvent]:
    """The rows one trace message gives for the message at ``batch_index`` of its record."""
    kind = fields.get("traceType")
    offset = int(fields.get("queueOffset", -1)) + batch_index - int(fields.get("index", 0))

    def row(time_ms: object, event: str, cost_ms: float | None, detail: str) -> TraceEvent:
        return TraceEvent(
            int(time_ms or 0),  # type: ignore[call-overload]
            event,
            str(fields.get("broker", "")),
            str(fields.get("topic", "")),
            int(fields.get("queueId", -1)),
            offset,
            str(fields.get("groupName", "")),
            str(fields.get("clientHost", "")),
            cost_ms,
            detail,
        )

    if kind == PUB:
        return [
            row(
                fields.get("bornTime"),
                "sent",
                None,
                f"msgId {fields.get('msgId', '')}, batch of {fields.get('count', 1)}",
            ),
            row(fields.get("storeTime"), "stored", float(fields.get("costTime", 0)), f"on {fields.get('broker', '')}"),
        ]
    if kind == SUB_BEFORE:
        return [row(fields.get("timeStamp"), "delivered", None, f"by {fields.get('via', 'pull')}")]
    return [row(fields.get("timeStamp"), str(kind), None, str(fields.get("detail", "")))]


def acknowledgement(fields: dict[str, Any], delivered: TraceEvent) -> TraceEvent | None:
    """The row a commit (a decoded ``Commit`` trace body) gives the message ``delivered``
    names, if it acknowledges it: the group's, on its queue, past its offset, not before."""
    offset = int(fields.get("commitOffset", -1))
    at_ms = int(fields.get("timeStamp", 0))
    if offset <= delivered.queue_offset or at_ms < delivered.time_ms:
        return None
    if (fields.get("groupName"), fields.get("topic"), fields.get("queueId")) != (
        delivered.group,
        delivered.topic,
        delivered.queue_id,
    ):
        return None
    return TraceEvent(
        at_ms,
        ACKNOWLEDGED,
        str(fields.get("broker", "")),
        delivered.topic,
        delivered.queue_id,
        delivered.queue_offset,
        delivered.group,
        str(fields.get("clientHost", "")),
        None,
        f"offset {offset} committed",
    )
