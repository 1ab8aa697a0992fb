"""Message property names RocketMQ gives a meaning to, shared by every client that writes them
(the v2 endpoint, the Spark sink) and read back by every consumer."""

from __future__ import annotations

from typing import Final

UNIQ_KEY: Final = "UNIQ_KEY"  # the message id its producer made
SHARDING_KEY: Final = "__SHARDINGKEY"  # a FIFO message's group (v2 message_group; the sink's shardingKey)
REAL_TOPIC: Final = "REAL_TOPIC"  # a held message's own topic (delay, half)
DELIVER_MS: Final = "TIMER_DELIVER_MS"  # a delay message's time
TAGS: Final = "TAGS"  # a message's tag, as RocketMQ's properties hold it (SQL92 filters read it by this name)
KEYS: Final = "KEYS"  # its keys, joined by spaces
