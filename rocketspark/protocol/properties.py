"""Message property names RocketMQ gives a meaning to, shared by every client that writes them
(the v2 endpoint, the Spark sink) and read back by every consumer."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

UNIQ_KEY: Final = "UNIQ_KEY"  # the message id its producer made
SHARDING_KEY: Final = "__SHARDINGKEY"  # a FIFO message's group (v2 message_group; the sink's shardingKey)
REAL_TOPIC: Final = "REAL_TOPIC"  # a held message's own topic (delay, half)
DELIVER_MS: Final = "TIMER_DELIVER_MS"  # a delay message's time
TAGS: Final = "TAGS"  # a message's tag, as RocketMQ's properties hold it (SQL92 filters read it by this name)
KEYS: Final = "KEYS"  # its keys, joined by spaces
TRANSACTION_PREPARED: Final = "TRAN_MSG"  # "true": a transaction's half message
PRODUCER_GROUP: Final = "PGROUP"  # a 4.x half message's producer group (who to check it with)
# A priority message's priority (RocketMQ 5.4, RIP-80: its MessageConst.PROPERTY_PRIORITY), a
# whole number from 0 up: higher is served first to pop consumers.
PRIORITY: Final = "_SYS_MSG_PRIORITY_"
MAX_PRIORITY: Final = (1 << 31) - 1  # the v2 field is an int32
# A delay, as each client family writes it: a level (4.x), a due time (ali-ons, Aliyun ONS), or
# RocketMQ 5's delay from now (DELIVER_MS above is its due time).
DELAY_LEVEL: Final = "DELAY"
START_DELIVER_TIME: Final = "__STARTDELIVERTIME"
TIMER_DELAY_SEC: Final = "TIMER_DELAY_SEC"
TIMER_DELAY_MS: Final = "TIMER_DELAY_MS"


def priority_of(properties: Mapping[str, str] | None) -> int | None:
    """A stored message's priority, or None: it has none, or one that is no whole number from 0
    to ``MAX_PRIORITY`` (written to the property by hand), which no reader should trip on."""
    text = properties.get(PRIORITY) if properties else None
    if not text or len(text) > 10 or not text.isascii() or not text.isdigit() or int(text) > MAX_PRIORITY:
        return None
    return int(text)
