"""The fields every request family's shapes are made of: names, queue ids, offsets, counts,
each with its range, and the base of every header and body shape.

A limit is declared once here, so a topic name or a queue id means the same in every request.
"""

from __future__ import annotations

from typing import Annotated, Final

from msgspec import Meta, Struct

from rocketspark.protocol.validation import TOPIC_NAME_MAX, TOPIC_NAME_PATTERN

MAX_QUEUES: Final = 1024
MAX_TOPICS_PER_REQUEST: Final = 1024
MAX_TOPICS_PER_BROKER: Final = 65_536
MAX_TAGS: Final = 256
NAME_MAX: Final = 255
CLIENT_ID_MAX: Final = 512
I64_MAX: Final = 2**63 - 1
I32_MAX: Final = 2**31 - 1
ADDRESS_PATTERN: Final = r"^\S+:[0-9]{1,5}$"
QUEUE_KEY_PATTERN: Final = r"^(?:0|[1-9][0-9]{0,2}|10[01][0-9]|102[0-3])$"  # "0" to "1023", no leading zeros
MAX_REPLICAS: Final = 64  # replicas of one group in a controller request

Topic = Annotated[str, Meta(min_length=1, max_length=TOPIC_NAME_MAX, pattern=TOPIC_NAME_PATTERN)]
Topics = Annotated[list[Topic], Meta(max_length=MAX_TOPICS_PER_REQUEST)]
Name = Annotated[str, Meta(min_length=1, max_length=NAME_MAX)]
ClientId = Annotated[str, Meta(min_length=1, max_length=CLIENT_ID_MAX)]
Address = Annotated[str, Meta(max_length=NAME_MAX, pattern=ADDRESS_PATTERN)]
QueueId = Annotated[int, Meta(ge=0, le=MAX_QUEUES - 1)]
QueueIdOrNone = Annotated[int, Meta(ge=-1, le=MAX_QUEUES - 1)]  # -1: none (a send: the broker picks)
QueueCount = Annotated[int, Meta(ge=1, le=MAX_QUEUES)]
Perm = Annotated[int, Meta(ge=0, le=7)]  # bits 4 read, 2 write, 1 inherit
Offset = Annotated[int, Meta(ge=0, le=I64_MAX)]
OffsetOrNone = Annotated[int, Meta(ge=-1, le=I64_MAX)]  # gens, epochs, end offsets, times: -1 is none
Count = Annotated[int, Meta(ge=0, le=I32_MAX)]
Tag = Annotated[str, Meta(max_length=NAME_MAX)]
QueueKey = Annotated[str, Meta(pattern=QUEUE_KEY_PATTERN)]  # a map key naming a logical queue
ReplicaId = Annotated[int, Meta(ge=0, le=MAX_QUEUES - 1)]  # a replica of a group: 0-1023, as in HA requests

# Readable versions of constraints whose msgspec wording is a regex.
ALLOWED: Final = {
    f"matching regex {TOPIC_NAME_PATTERN!r}": (
        f'of 1-{TOPIC_NAME_MAX} letters, digits, "_", "-", "%" and "|" (a legal topic name)'
    ),
    f"matching regex {ADDRESS_PATTERN!r}": "of the form host:port",
    f"matching regex {QUEUE_KEY_PATTERN!r}": "naming a logical queue, 0-1023",
}


class Shape(Struct, rename="camel"):
    """Base of the header and body shapes: camelCase on the wire, snake_case here."""


# -- headers more than one family uses -------------------------------------------------------


class NoFields(Shape):
    pass


class TopicHeader(Shape):
    topic: Topic


class BrokerHeader(Shape):
    broker_name: Name
