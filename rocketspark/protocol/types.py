"""Value types that cross the wire: messages, results, topic configs and route data.

Each type converts itself to and from plain msgpack-able values (``to_wire`` /
``from_wire``). Hot-path types (messages) are slots classes; metadata types are frozen
dataclasses.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import msgpack

from rocketspark.protocol import record


class Perm:
    """Permission bits of a topic or broker, as in RocketMQ's ``PermName``."""

    PRIORITY = 8
    READ = 4
    WRITE = 2
    INHERIT = 1
    READ_WRITE = READ | WRITE

    @staticmethod
    def describe(perm: int) -> str:
        return ("R" if perm & Perm.READ else "-") + ("W" if perm & Perm.WRITE else "-") + ("X" if perm & Perm.INHERIT else "-")


class Message:
    """A message to send. ``keys`` index it for lookups; ``tags`` is the one server-side filter tag."""

    __slots__ = ("body", "keys", "properties", "queue_id", "sharding_key", "tags", "topic")

    def __init__(
        self,
        topic: str,
        body: bytes,
        *,
        tags: str | None = None,
        keys: list[str] | str | None = None,
        properties: dict[str, str] | None = None,
        queue_id: int | None = None,
        sharding_key: str | None = None,
    ) -> None:
        self.topic = topic
        self.body = bytes(body) if not isinstance(body, bytes) else body
        self.tags = tags
        self.keys: list[str] = [keys] if isinstance(keys, str) else list(keys or ())
        self.properties: dict[str, str] = dict(properties or {})
        self.queue_id = queue_id  # a fixed queue, overriding the selector
        self.sharding_key = sharding_key  # same key -> same queue (ordered per key)

    def __repr__(self) -> str:
        return f"Message(topic={self.topic!r}, body={len(self.body)}B, tags={self.tags!r}, keys={self.keys!r})"


class MessageExt:
    """A stored message as a consumer sees it."""

    __slots__ = (
        "body",
        "born_timestamp",
        "broker_name",
        "commitlog_offset",
        "keys",
        "properties",
        "queue_id",
        "queue_offset",
        "store_timestamp",
        "tags",
        "topic",
    )

    def __init__(
        self,
        topic: str,
        queue_id: int,
        queue_offset: int,
        body: bytes,
        tags: str | None,
        keys: list[str],
        properties: dict[str, str],
        born_timestamp: int,
        store_timestamp: int,
        commitlog_offset: int,
        broker_name: str,
    ) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.queue_offset = queue_offset
        self.body = body
        self.tags = tags
        self.keys = keys
        self.properties = properties
        self.born_timestamp = born_timestamp  # ms since the epoch, producer clock
        self.store_timestamp = store_timestamp  # ms since the epoch, broker clock
        self.commitlog_offset = commitlog_offset
        self.broker_name = broker_name

    @property
    def msg_id(self) -> str:
        return record.msg_id(self.broker_name, self.commitlog_offset)

    def __repr__(self) -> str:
        return (
            f"MessageExt(topic={self.topic!r}, queue_id={self.queue_id}, queue_offset={self.queue_offset}, "
            f"body={len(self.body)}B, tags={self.tags!r})"
        )


def decode_records(
    buf: bytes, topic: str, broker_name: str, *, queue_id: int | None = None, offset_delta: int = 0, verify: bool = True
) -> list[MessageExt]:
    """Decode the concatenated records of a pull response.

    ``queue_id`` and ``offset_delta`` translate physical positions into the queue view the
    caller asked for (a logical queue of a static topic); by default they are left as stored.
    """
    out: list[MessageExt] = []
    unpack_header = record.HEADER.unpack_from
    unpackb = msgpack.unpackb
    view = memoryview(buf)
    pos, end = 0, len(buf)
    while pos < end:
        if verify:
            record.check_record(view, pos, end)
        total, _magic, _crc, qid, qoff, phys, born, store, _flag, tlen = unpack_header(buf, pos)
        body, tags, keys, props = unpackb(view[pos + record.HEADER_SIZE + tlen : pos + total])
        out.append(
            MessageExt(
                topic,
                qid if queue_id is None else queue_id,
                qoff + offset_delta,
                body,
                tags,
                keys,
                props,
                born,
                store,
                phys,
                broker_name,
            )
        )
        pos += total
    return out


class SendStatus(Enum):
    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"


@dataclass(frozen=True, slots=True)
class SendResult:
    """Where a sent message (or the first of a batch) was stored."""

    status: SendStatus
    msg_id: str
    topic: str
    broker_name: str
    queue_id: int
    queue_offset: int
    count: int = 1  # messages stored by this call (a batch reports its first message)


class PullStatus(Enum):
    """Expected pull outcomes; only faults are exceptions (RocketMQ's ``PullStatus``)."""

    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


@dataclass(frozen=True, slots=True)
class PullResult:
    status: PullStatus
    messages: list[MessageExt]
    next_offset: int  # where the next pull should start
    min_offset: int
    max_offset: int  # one past the newest message


@dataclass(frozen=True, slots=True)
class TopicConfig:
    """A topic as one broker stores it."""

    name: str
    read_queue_nums: int = 8
    write_queue_nums: int = 8
    perm: int = Perm.READ_WRITE

    def to_wire(self) -> dict[str, Any]:
        return {"name": self.name, "r": self.read_queue_nums, "w": self.write_queue_nums, "perm": self.perm}

    @classmethod
    def from_wire(cls, d: dict[str, Any]) -> TopicConfig:
        return cls(name=d["name"], read_queue_nums=d["r"], write_queue_nums=d["w"], perm=d["perm"])


@dataclass(frozen=True, slots=True)
class QueueData:
    """How many queues one broker serves for a topic, and with which permission."""

    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int

    def to_wire(self) -> dict[str, Any]:
        return {"broker": self.broker_name, "r": self.read_queue_nums, "w": self.write_queue_nums, "perm": self.perm}

    @classmethod
    def from_wire(cls, d: dict[str, Any]) -> QueueData:
        return cls(d["broker"], d["r"], d["w"], d["perm"])


@dataclass(frozen=True, slots=True)
class BrokerData:
    cluster: str
    broker_name: str
    address: str

    def to_wire(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "broker": self.broker_name, "addr": self.address}

    @classmethod
    def from_wire(cls, d: dict[str, Any]) -> BrokerData:
        return cls(d["cluster"], d["broker"], d["addr"])


@dataclass(frozen=True, slots=True)
class TopicRouteData:
    """The nameserver's answer to "where does this topic live"."""

    topic: str
    brokers: tuple[BrokerData, ...]
    queues: tuple[QueueData, ...]
    fetched_at: float = field(default_factory=time.monotonic, compare=False)

    def address_of(self, broker_name: str) -> str | None:
        for b in self.brokers:
            if b.broker_name == broker_name:
                return b.address
        return None

    def to_wire(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "brokers": [b.to_wire() for b in self.brokers],
            "queues": [q.to_wire() for q in self.queues],
        }

    @classmethod
    def from_wire(cls, d: dict[str, Any]) -> TopicRouteData:
        return cls(
            topic=d["topic"],
            brokers=tuple(BrokerData.from_wire(b) for b in d["brokers"]),
            queues=tuple(QueueData.from_wire(q) for q in d["queues"]),
        )
