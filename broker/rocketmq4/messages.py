"""A 4.x client's message as ours, and ours as a 4.x client reads it.

RocketMQ keeps everything of a message but its body in one properties map; we keep the tag and
keys apart (the tag summary filters batches, keys are indexed) and the rest as properties. A
message from a 4.x producer therefore loses nothing on its way, and one from our producer, the
Spark sink or a RocketMQ 5 client shows a 4.x consumer the properties it would have in
RocketMQ: ``TAGS``, ``KEYS`` (space-separated), ``UNIQ_KEY`` and the rest.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Final

from rocketspark.codec import ids
from rocketspark.errors import ConfigError, InvalidParameterError
from rocketspark.protocol.group_topics import RECONSUME_TIME
from rocketspark.protocol.properties import (
    DELAY_LEVEL,
    DELIVER_MS,
    KEYS,
    START_DELIVER_TIME,
    TAGS,
    TIMER_DELAY_SEC,
    UNIQ_KEY,
)
from rocketspark.protocol.types import Message, MessageExt
from rocketspark.rocketmq4.records import Record, host_of

# What a client adds for itself (the offsets it pulled between, whether to wait for a flush):
# never stored.
TRANSIENT: Final = frozenset({"WAIT", "MIN_OFFSET", "MAX_OFFSET"})
DEFAULT_DELAY_LEVELS: Final = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"  # messageDelayLevel
_UNITS: Final = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def to_message(topic: str, body: bytes, properties: Mapping[str, str]) -> Message:
    """Ours, from a 4.x producer's topic, body and properties."""
    keys = [k for k in properties.get(KEYS, "").split(" ") if k]
    kept = {k: v for k, v in properties.items() if k not in TRANSIENT and k != TAGS and k != KEYS}
    return Message(topic, body, tags=properties.get(TAGS) or None, keys=keys, properties=kept)


class DelayLevels:
    """RocketMQ's delay levels (``messageDelayLevel``: level n waits the n-th time of the list)."""

    def __init__(self, text: str = DEFAULT_DELAY_LEVELS) -> None:
        self.text = text
        try:
            self.levels_ms = tuple(int(t[:-1]) * _UNITS[t[-1]] for t in text.split())
        except (KeyError, ValueError, IndexError):
            raise ConfigError(
                f'message_delay_level {text!r}: give times like "1s 5s 10s 30s 1m 2m ... 2h" (units s, m, h, d)'
            ) from None
        if not self.levels_ms:
            raise ConfigError("message_delay_level names no level")

    def ms(self, level: int) -> int:
        """How long level ``level`` holds a message (0 for level 0: none); past the last, the last."""
        if level == 0:
            return 0
        if level < 0:
            raise InvalidParameterError(f"delay level {level} does not exist: levels are 1-{len(self.levels_ms)}")
        return self.levels_ms[min(level, len(self.levels_ms)) - 1]


def deliver_at_ms(properties: Mapping[str, str], levels: DelayLevels, now_ms: int | None = None) -> int | None:
    """When a delay message is due (None: not a delay message), from whichever property its
    client family writes: ``DELAY`` (a level), ``__STARTDELIVERTIME`` (ali-ons), RocketMQ 5's
    ``TIMER_DELIVER_MS`` or ``TIMER_DELAY_SEC``."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    try:
        if properties.get(DELAY_LEVEL):
            wait = levels.ms(int(properties[DELAY_LEVEL]))
            return now + wait if wait else None
        if properties.get(START_DELIVER_TIME):
            return int(properties[START_DELIVER_TIME])
        if properties.get(DELIVER_MS):
            return int(properties[DELIVER_MS])
        if properties.get(TIMER_DELAY_SEC):
            return now + int(properties[TIMER_DELAY_SEC]) * 1000
    except ValueError:
        given = {
            k: properties[k] for k in (DELAY_LEVEL, START_DELIVER_TIME, DELIVER_MS, TIMER_DELAY_SEC) if k in properties
        }
        raise InvalidParameterError(f"a delay property is not a whole number: {given}") from None
    return None


def properties_of(message: MessageExt) -> dict[str, str]:
    """What a 4.x client reads as the message's properties: its client id is ``UNIQ_KEY``
    (ours derive it from their batch's first)."""
    out: dict[str, str] = {}
    if message.tags is not None:
        out[TAGS] = message.tags
    if message.keys:
        out[KEYS] = " ".join(message.keys)
    out.update(message.properties)
    if UNIQ_KEY not in out:
        client_id = message.client_id
        if client_id is not None:
            out[UNIQ_KEY] = client_id
    return out


def to_record(message: MessageExt, queue_id: int | None = None, topic: str | None = None) -> Record:
    """The MessageExt record a 4.x consumer reads for one of our messages (its store host the
    broker it was read from)."""
    properties = properties_of(message)
    return Record(
        topic or message.topic,
        message.queue_id if queue_id is None else queue_id,
        message.queue_offset,
        ids.physical_offset(message.commitlog_offset, message.batch_index),
        message.body,
        properties,
        message.born_timestamp,
        message.store_timestamp,
        host_of(message.batch_ids.host),
        reconsume_times=int(properties.get(RECONSUME_TIME, "0") or 0),
    )


def mint_client_id() -> str:
    """A client id (UNIQ_KEY) for a message its producer sent without one (ours, in RocketMQ
    Java's layout: ``codec.ids``)."""
    return ids.client_id_hex(ids.mint(1))
