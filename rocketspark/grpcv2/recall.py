"""Recalling a delay message before its time (RocketMQ 5.5's ``RecallMessage``), by the recall
handle its send answered.

A delay message waits in its broker's timer topic (:mod:`rocketspark.grpcv2.delay`); recalling
it marks it done there with the outcome ``recalled``, so it is never delivered, whichever
broker's endpoint is asked: the broker that holds it reads its done topic before each round of
deliveries. On the endpoint of that broker's master it is dropped from the waiting messages at
once.

The handle is RocketMQ's ``RecallMessageHandle.HandleV1``: ``v1 <topic> <broker> <due ms>
<message id>`` in URL-safe Base64, with one more field, the message's offset in the timer topic,
which RocketMQ's own decoder ignores. What RocketMQ answers, this answers too, with the
status its proxy gives (``INTERNAL_SERVER_ERROR``, for the broker's ``ILLEGAL_OPERATION``) and
its remark first, then a sentence saying what happened:

- a message whose time came (delivered, or being delivered): ``recall failed, timestamp invalid``;
- a handle of another topic: ``recall failed, topic not match``;
- a handle that is not one (or names no message held): ``recall handle is invalid``.

A recall within a moment of the message's time may come too late, as in RocketMQ: the answer is
OK, and the message is delivered all the same.
"""

from __future__ import annotations

import base64
import binascii
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from rocketspark.errors import NoRouteInfoError, TopicNotExistError
from rocketspark.grpcv2.delay import DelayScheduler, timer_done_topic, timer_topic
from rocketspark.grpcv2.limits import MAX_DELAY_MS
from rocketspark.grpcv2.stubs import definition_pb2 as pb
from rocketspark.grpcv2.translate import Refused
from rocketspark.protocol.properties import DELIVER_MS, REAL_TOPIC, UNIQ_KEY
from rocketspark.protocol.types import Message, MessageExt

VERSION: Final = "v1"
RECALLED: Final = "recalled"  # the outcome in the timer's done topic
FAILED: Final = pb.Code.INTERNAL_SERVER_ERROR  # what RocketMQ's proxy answers for each refusal


@dataclass(frozen=True, slots=True)
class RecallHandle:
    topic: str
    broker_name: str  # whose timer topic holds the message
    deliver_at_ms: int
    message_id: str
    offset: int  # its offset in that timer topic

    def encode(self) -> str:
        fields = (VERSION, self.topic, self.broker_name, str(self.deliver_at_ms), self.message_id, str(self.offset))
        return base64.urlsafe_b64encode(" ".join(fields).encode()).decode()

    @staticmethod
    def decode(text: str) -> RecallHandle | None:
        """The handle ``text`` encodes, or None if it is not one this endpoint gave."""
        try:
            raw = base64.urlsafe_b64decode(text.encode("ascii")).decode()
        except (binascii.Error, UnicodeError, ValueError):
            return None
        parts = raw.split(" ")
        if len(parts) != 6 or parts[0] != VERSION or not all(map(_decimal, (parts[3], parts[5]))):
            return None
        return RecallHandle(parts[1], parts[2], int(parts[3]), parts[4], int(parts[5]))


def recall(delay: DelayScheduler, topic: str, text: str, now_ms: int | None = None) -> str:
    """Recall the delay message of ``topic`` that ``text`` names (a worker thread): its message
    id; ``Refused`` with RocketMQ's status and a sentence when it cannot be."""
    handle = RecallHandle.decode(text)
    if handle is None:
        raise Refused(FAILED, f"recall handle is invalid: {text[:80]!r} is not a recall handle a send answered")
    if handle.topic != topic:
        raise Refused(
            FAILED,
            f"recall failed, topic not match: the handle is of a message of topic {handle.topic!r}, "
            f"not {topic!r}; recall it with its own topic",
        )
    now = int(time.time() * 1000) if now_ms is None else now_ms
    if handle.deliver_at_ms <= now or handle.deliver_at_ms - now >= MAX_DELAY_MS:
        raise Refused(
            FAILED,
            f"recall failed, timestamp invalid: message {handle.message_id} was due at "
            f"{_when(handle.deliver_at_ms)}, so it was delivered to {topic!r} already (or is being "
            "delivered); a delay message can be recalled only before its time",
        )
    held = _held(delay, handle)
    if held is None:
        raise Refused(
            FAILED,
            f"recall handle is invalid: broker {handle.broker_name!r} holds no delay message "
            f"{handle.message_id} of topic {topic!r} at offset {handle.offset} of its timer topic",
        )
    log = delay.holder.current() if handle.broker_name == delay.holder.broker_name else None
    if log is not None:  # this broker's master: out of the waiting messages at once
        log.mark_done(handle.offset, RECALLED)
    else:
        done = Message(timer_done_topic(handle.broker_name), f"{handle.offset} {RECALLED}".encode())
        delay.clients.producer.send(done)
    return handle.message_id


def _held(delay: DelayScheduler, handle: RecallHandle) -> MessageExt | None:
    """The message held at the handle's offset, if it is the one the handle names."""
    try:
        result = delay.clients.consumer.pull(timer_topic(handle.broker_name), 0, handle.offset, 1)
    except (TopicNotExistError, NoRouteInfoError):  # no such broker, or it never held one
        return None
    for message in result.messages:
        properties = message.properties
        if (
            message.queue_offset == handle.offset
            and properties.get(REAL_TOPIC) == handle.topic
            and properties.get(UNIQ_KEY, "") == handle.message_id
            and properties.get(DELIVER_MS) == str(handle.deliver_at_ms)
        ):
            return message
    return None


def _decimal(text: str) -> bool:
    return text.isascii() and text.isdigit() and len(text) <= 19


def _when(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
