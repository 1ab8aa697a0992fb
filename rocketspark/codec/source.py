"""What every message of one pull shares: where it was read and how it is labelled.

A pull reads one physical queue of one broker; its messages carry the queue's topic, the
broker's name and address (``ids.store_host``: their offset ids name it) and, for a static
topic's segment, the logical queue id and offset delta that relabel them. Both readers of a
pull take it: the message objects (:mod:`rocketspark.codec.messages`) and the Arrow batch
(:mod:`rocketspark.codec.arrow`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Source:
    topic: str
    queue_id: int  # the queue the messages are labelled with: a static topic's logical queue id
    offset_delta: int  # logical minus physical offset of the segment (0: not static)
    broker_name: str
    host: bytes = b"\0\0\0\0\0\0\0\0"  # ids.store_host of the broker it was read from (offset ids)
