"""What a group consumer does with messages its handler failed on: RocketMQ's retry rule.

A failed message is sent back to the group's retry topic, ``%RETRY%<group>``, and the queue
moves on: one poison message no longer holds up the messages behind it. The group consumes its
retry topic as well, handing each message over again once its delay has passed; the delay
grows with each attempt (RocketMQ's levels: 10 s, 30 s, 1 min, 2 min, ... 2 h). After
``max_reconsume_times`` attempts (16) it goes to the dead-letter queue, ``%DLQ%<group>``,
where it waits for a person (``Consumer.pull`` reads it like any topic).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from rocketspark.errors import InvalidParameterError
from rocketspark.protocol.group_topics import (
    DUE_AT_MS,
    MAX_RECONSUME_TIMES,
    ORIGIN_MESSAGE_ID,
    RECONSUME_TIME,
    RETRY_TOPIC,
    dlq_topic,
    retry_topic,
)
from rocketspark.protocol.properties import UNIQ_KEY
from rocketspark.protocol.types import Message, MessageExt

_S, _M, _H = 1000, 60_000, 3_600_000
# RocketMQ's delay levels from the third on ("10s 30s 1m 2m ... 2h"): attempt n waits the n-th.
RETRY_DELAYS_MS: Final = (10 * _S, 30 * _S, *(n * _M for n in range(1, 11)), 20 * _M, 30 * _M, _H, 2 * _H)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_reconsume_times: int = MAX_RECONSUME_TIMES
    delays_ms: Sequence[int] = RETRY_DELAYS_MS  # the wait before attempt n+1 is delays_ms[n] (the last repeats)

    def __post_init__(self) -> None:
        if self.max_reconsume_times < 0:
            raise InvalidParameterError("max_reconsume_times must be >= 0 (0: straight to the dead-letter queue)")
        if not self.delays_ms or any(d < 0 for d in self.delays_ms):
            raise InvalidParameterError("retry delays must be a non-empty list of milliseconds >= 0")

    def send_back(self, group: str, message: MessageExt, now_ms: int | None = None) -> Message:
        """The copy of a failed message to send: to the retry topic, due after its delay, or
        to the dead-letter queue when it has been consumed again too often."""
        times = int(message.properties.get(RECONSUME_TIME, "0")) + 1
        properties = dict(message.properties)
        properties.setdefault(RETRY_TOPIC, message.topic)
        properties.setdefault(ORIGIN_MESSAGE_ID, message.msg_id)
        if message.client_id is not None:  # handed over again under the same id, as RocketMQ's copy keeps UNIQ_KEY
            properties.setdefault(UNIQ_KEY, message.client_id)
        properties[RECONSUME_TIME] = str(times)
        if times > self.max_reconsume_times:
            properties.pop(DUE_AT_MS, None)
            target = dlq_topic(group)
        else:
            now = int(time.time() * 1000) if now_ms is None else now_ms
            properties[DUE_AT_MS] = str(now + self.delays_ms[min(times, len(self.delays_ms)) - 1])
            target = retry_topic(group)
        return Message(target, message.body, tags=message.tags, keys=message.keys, properties=properties)


def due_at_ms(message: MessageExt) -> int:
    """When a message from the retry topic may be handed over again (0: now)."""
    return int(message.properties.get(DUE_AT_MS, "0"))


def as_first_sent(message: MessageExt) -> MessageExt:
    """A retried message as the handler sees it: under the topic it was first sent to."""
    first = message.properties.get(RETRY_TOPIC)
    if not first:
        return message
    return MessageExt(first, *message[1:])
