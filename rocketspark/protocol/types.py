"""Value types that cross the wire: messages, results, topic configs and route data.

Each type converts itself to and from plain msgpack-able values (``to_wire`` /
``from_wire``). Hot-path types (messages) are slots classes; metadata types are frozen
dataclasses.
"""

from __future__ import annotations

import gc
import threading
import time
from dataclasses import dataclass, field
from enum import Enum
from operator import itemgetter
from typing import Any

from rocketspark.codec import ids
from rocketspark.protocol.properties import UNIQ_KEY
from rocketspark.protocol.static_mapping import TopicMapping


class Perm:
    """Permission bits of a topic or broker, as in RocketMQ's ``PermName``."""

    PRIORITY = 8
    READ = 4
    WRITE = 2
    INHERIT = 1
    READ_WRITE = READ | WRITE

    @staticmethod
    def describe(perm: int) -> str:
        return (
            ("R" if perm & Perm.READ else "-")
            + ("W" if perm & Perm.WRITE else "-")
            + ("X" if perm & Perm.INHERIT else "-")
        )


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


_tuple_new = tuple.__new__


_NO_IDS = ids.BatchIds(None, bytes(8))


class MessageExt(tuple):  # type: ignore[type-arg]
    """A stored message as a consumer sees it.

    A tuple underneath: a pull decodes thousands of these, and a tuple is the cheapest
    object Python can build (and the one the garbage collector minds least). Its ids
    (``msg_id``, ``offset_msg_id``) are computed when asked for, from ``batch_ids``, one
    object shared by the messages of its batch.
    """

    __slots__ = ()

    def __new__(
        cls,
        topic: str,
        queue_id: int,
        queue_offset: int,
        body: bytes,
        tags: str | None,
        keys: list[str] | None,
        properties: dict[str, str] | None,
        born_timestamp: int,
        store_timestamp: int,
        commitlog_offset: int,
        broker_name: str,
        batch_index: int = 0,
        batch_ids: ids.BatchIds | None = None,
    ) -> MessageExt:
        return _tuple_new(
            cls,
            (
                topic,
                queue_id,
                queue_offset,
                body,
                tags,
                keys,
                properties,
                born_timestamp,
                store_timestamp,
                commitlog_offset,
                broker_name,
                batch_index,
                batch_ids,
            ),
        )

    topic: str = property(itemgetter(0))  # type: ignore[assignment]
    queue_id: int = property(itemgetter(1))  # type: ignore[assignment]
    queue_offset: int = property(itemgetter(2))  # type: ignore[assignment]
    body: bytes = property(itemgetter(3))  # type: ignore[assignment]
    tags: str | None = property(itemgetter(4))  # type: ignore[assignment]
    born_timestamp: int = property(itemgetter(7))  # type: ignore[assignment]  # ms, producer clock
    store_timestamp: int = property(itemgetter(8))  # type: ignore[assignment]  # ms, broker clock
    commitlog_offset: int = property(itemgetter(9))  # type: ignore[assignment]  # of its batch record
    broker_name: str = property(itemgetter(10))  # type: ignore[assignment]
    batch_index: int = property(itemgetter(11))  # type: ignore[assignment]  # its place in the batch

    @property
    def keys(self) -> list[str]:
        return self[5] or []

    @property
    def properties(self) -> dict[str, str]:
        return self[6] or {}

    @classmethod
    def from_wire(cls, fields: list[Any]) -> MessageExt:
        """A MessageExt from the fields a look-up answers with (``list(message)`` packed; its
        BatchIds comes as a list)."""
        batch_ids = ids.BatchIds(*fields[12]) if len(fields) > 12 and fields[12] else None
        return cls(*[*fields[:12], batch_ids])

    @property
    def batch_ids(self) -> ids.BatchIds:
        """Its batch's first client id and the broker it was read from (``codec.ids``)."""
        return self[12] or _NO_IDS

    @property
    def client_id(self) -> str | None:
        """The id its producer gave it (RocketMQ's ``UNIQ_KEY``): its own ``UNIQ_KEY``
        property, else its batch's first id plus its place; None for a message stored before
        client ids (a record of version 2)."""
        own = self[6].get(UNIQ_KEY) if self[6] else None
        return own or self.batch_ids.client_id(self[11])

    @property
    def msg_id(self) -> str:
        """Its id, as RocketMQ's ``getMsgId``: the client id, else the offset id. The id a
        send returned, the Spark source's ``msgId``, what ``admin query-msg --id`` finds."""
        return self.client_id or self.offset_msg_id

    @property
    def offset_msg_id(self) -> str:
        """Where it is stored (RocketMQ's ``offsetMsgId``): the address of the broker it was
        read from and its physical offset there (``codec.ids``); ``query-msg --id`` finds it too."""
        return self.batch_ids.offset_msg_id(self[9], self[11])

    def __repr__(self) -> str:
        return (
            f"MessageExt(topic={self[0]!r}, queue_id={self[1]}, queue_offset={self[2]}, body={len(self[3])}B, "
            f"tags={self[4]!r}, broker_name={self[10]!r})"
        )


class _GcPause:
    """Garbage collection off while any thread is inside, back on when the last one leaves.

    ``gc.disable()`` is process-wide: decoders running in several threads (a group consumer
    runs one per queue) must not turn it back on under each other, nor leave it off. It is
    turned back on only if it was on when the first thread came in.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._inside = 0
        self._was_on = False

    def __enter__(self) -> None:
        with self._lock:
            if self._inside == 0:
                self._was_on = gc.isenabled()
                gc.disable()
            self._inside += 1

    def __exit__(self, *_: object) -> None:
        with self._lock:
            self._inside -= 1
            if self._inside == 0 and self._was_on:
                gc.enable()


GC_PAUSE = _GcPause()


class SendStatus(Enum):
    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"


@dataclass(frozen=True, slots=True)
class SendResult:
    """Where a sent message (or the first of a batch) was stored, and its ids.

    ``msg_id`` is the client id of the first message stored (RocketMQ's ``UNIQ_KEY``: what
    ``MessageExt.msg_id``, the Spark source's ``msgId`` and ``admin query-msg --id`` show and
    find), ``offset_msg_id`` its offset id (RocketMQ's ``offsetMsgId``: broker address and
    physical offset); ``msg_ids()`` gives every stored message's client id. Both are "" when
    nothing was stored (every message of an idempotent resend was stored before)."""

    status: SendStatus
    msg_id: str
    topic: str
    broker_name: str
    queue_id: int
    queue_offset: int
    count: int = 1  # messages stored by this call (a batch reports its first message)
    duplicates: int = 0  # messages of an idempotent resend that the broker had stored already
    offset_msg_id: str = ""
    batch_first_id: str = field(default="", repr=False)  # the record's first id, as of the first stored message
    own_ids: dict[int, str] | None = field(default=None, repr=False)  # stored messages with a UNIQ_KEY of their own

    def msg_ids(self) -> list[str]:
        """The client ids of the ``count`` messages stored, in order: consecutive from the
        batch's first (``codec.ids``), but for a message that had a ``UNIQ_KEY`` of its own."""
        if not self.batch_first_id:
            return [self.msg_id] if self.msg_id else []
        first, own = bytes.fromhex(self.batch_first_id), self.own_ids or {}
        return [own.get(i) or ids.client_id_at(first, i) for i in range(self.count)]


class PullStatus(Enum):
    """Expected pull outcomes; only faults are exceptions (RocketMQ's ``PullStatus``)."""

    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


@dataclass(frozen=True, slots=True)
class PullResult:
    status: PullStatus
    messages: list[MessageExt]  # empty in a columnar read: see ``batch``
    next_offset: int  # where the next pull should start
    min_offset: int
    max_offset: int  # one past the newest message
    batch: Any = None  # a columnar read's messages, as a pyarrow RecordBatch (codec.arrow.SCHEMA)

    @property
    def count(self) -> int:
        """Messages in the result, in either form."""
        return len(self.messages) if self.batch is None else int(self.batch.num_rows)


@dataclass(frozen=True, slots=True)
class TopicConfig:
    """A topic as one broker stores it."""

    name: str
    read_queue_nums: int = 8
    write_queue_nums: int = 8
    perm: int = Perm.READ_WRITE
    trace: bool = False  # its messages' lives are recorded (broker.trace)

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {
            "name": self.name,
            "r": self.read_queue_nums,
            "w": self.write_queue_nums,
            "perm": self.perm,
        }
        if self.trace:  # absent when off: files and peers of before it read the same
            wire["trace"] = True
        return wire

    @classmethod
    def from_wire(cls, d: dict[str, Any]) -> TopicConfig:
        return cls(
            name=d["name"], read_queue_nums=d["r"], write_queue_nums=d["w"], perm=d["perm"], trace=bool(d.get("trace"))
        )


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
    """A broker group in a route: its master's address ("" while it has none) and, for a
    replica group, its live slaves' addresses (reads may go there)."""

    cluster: str
    broker_name: str
    address: str
    replicas: tuple[str, ...] = ()

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {"cluster": self.cluster, "broker": self.broker_name, "addr": self.address}
        if self.replicas:
            wire["replicas"] = list(self.replicas)
        return wire

    @classmethod
    def from_wire(cls, d: dict[str, Any]) -> BrokerData:
        return cls(d["cluster"], d["broker"], d["addr"], tuple(d.get("replicas", ())))


@dataclass(frozen=True, slots=True)
class TopicRouteData:
    """The nameserver's answer to "where does this topic live"."""

    topic: str
    brokers: tuple[BrokerData, ...]
    queues: tuple[QueueData, ...]
    mapping: TopicMapping | None = None  # set for a static topic: its logical queues
    fetched_at: float = field(default_factory=time.monotonic, compare=False)

    def address_of(self, broker_name: str) -> str | None:
        """Where writes to the group go: its master ("" or None while there is none)."""
        for b in self.brokers:
            if b.broker_name == broker_name:
                return b.address
        return None

    def read_address_of(self, broker_name: str) -> str | None:
        """Where reads of the group go: its master, else one of its slaves."""
        for b in self.brokers:
            if b.broker_name == broker_name:
                return b.address or (b.replicas[0] if b.replicas else None)
        return None

    def to_wire(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "brokers": [b.to_wire() for b in self.brokers],
            "queues": [q.to_wire() for q in self.queues],
            "mapping": self.mapping.to_wire() if self.mapping else None,
        }

    @classmethod
    def from_wire(cls, d: dict[str, Any]) -> TopicRouteData:
        mapping = d.get("mapping")
        return cls(
            topic=d["topic"],
            brokers=tuple(BrokerData.from_wire(b) for b in d["brokers"]),
            queues=tuple(QueueData.from_wire(q) for q in d["queues"]),
            mapping=TopicMapping.from_wire(d["topic"], mapping) if mapping else None,
        )
