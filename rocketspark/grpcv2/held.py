"""Messages the endpoint holds back: delay messages until their time, half (transactional)
messages until their outcome. Stored durably in the cluster, never in their own topic early.

A held log is two single-queue system topics on the endpoint's broker, as RocketMQ keeps them:

- the *hold* topic has the messages themselves (a delay message's target time, a half
  message's transaction, in their properties);
- the *done* topic has one small record per held message that was dealt with (delivered,
  committed, rolled back), naming its offset in the hold topic and the outcome.

What is still held is "in hold, not in done"; both are read again at a start. Two watermarks,
stored as the offsets of a system group, bound that reading: every hold offset below the first
is done, and every done record below the second names an offset below the first. A message
delivered but not yet marked done when the broker stops is delivered again after the start
(never lost); all the others are not.

Reads and sends go through the endpoint's own clients, from worker threads; ``lock`` guards
the state (a request and the background round may change it at once).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Protocol

from rocketspark.client.consumer import Consumer
from rocketspark.codec import ids
from rocketspark.errors import NoRouteInfoError, TopicNotExistError
from rocketspark.grpcv2.clients import Clients
from rocketspark.protocol.types import Message, MessageExt, PullStatus, SendResult

log = logging.getLogger(__name__)

SYSTEM_GROUP = "rmq_sys_endpoint"  # whose offsets are the watermarks
READ_BATCH = 256
ENDED_KEPT = 100_000  # outcomes remembered below the watermark (a late repeated EndTransaction)


def placed(result: SendResult, message: Message) -> MessageExt:
    """The held message ``result`` says was stored (alone, as ``Holder.hold`` sends it), as
    message trace names a stored message: its record's broker, log offset and queue place
    (without its body: a trace event needs none)."""
    physical = ids.parse_offset_msg_id(result.offset_msg_id).physical
    properties = message.properties
    now = int(time.time() * 1000)
    return MessageExt(
        result.topic, result.queue_id, result.queue_offset, b"", message.tags, message.keys, properties, now, now,
        physical, result.broker_name,
    )  # fmt: skip


class Broker(Protocol):
    """What a held log needs of the broker the endpoint runs in (``endpoint.Host``)."""

    @property
    def broker_name(self) -> str: ...

    def is_master(self) -> bool: ...

    def has_topic(self, topic: str) -> bool: ...


@dataclass(slots=True)
class HeldLog:
    clients: Clients
    hold_topic: str
    done_topic: str
    broker_name: str  # where both topics live
    held: dict[int, MessageExt] = field(default_factory=dict)  # hold offset -> message, not done
    done: dict[int, tuple[int, str]] = field(default_factory=dict)  # hold offset -> (done offset, outcome)
    hold_next: int = 0  # the next hold offset to read
    done_next: int = 0
    marks: tuple[int, int] = (-1, -1)  # the watermarks last stored
    lock: threading.RLock = field(default_factory=threading.RLock)
    ended: OrderedDict[int, str] = field(default_factory=OrderedDict)  # outcomes below the watermark, the newest

    # -- start -----------------------------------------------------------------------------

    def open(self) -> None:
        """Read what is still held (a worker thread); TopicNotExistError or NoRouteInfoError
        while nothing was ever held."""
        consumer = self.clients.consumer
        self.hold_next = self._start(consumer, self.hold_topic)
        self.done_next = self._start(consumer, self.done_topic)
        self.marks = (self.hold_next, self.done_next)
        self.catch_up()

    def _start(self, consumer: Consumer, topic: str) -> int:
        committed = consumer.committed_offset(SYSTEM_GROUP, topic, 0)
        return committed if committed is not None else consumer.min_offset(topic, 0)

    def catch_up(self) -> list[MessageExt]:
        """Read what was added to both topics since the last look (a worker thread); the
        newly held messages, in order."""
        with self.lock:
            return self._catch_up()

    def _catch_up(self) -> list[MessageExt]:
        for record in self._read(self.done_topic, "done_next"):
            offset, _, outcome = record.body.decode().partition(" ")
            if offset.isascii() and offset.isdigit():
                self.done[int(offset)] = (record.queue_offset, outcome)
                self.held.pop(int(offset), None)
        fresh = [m for m in self._read(self.hold_topic, "hold_next") if m.queue_offset not in self.done]
        for message in fresh:
            self.held[message.queue_offset] = message
        return fresh

    def _read(self, topic: str, position: str) -> list[MessageExt]:
        consumer, read = self.clients.consumer, []
        while True:
            offset = getattr(self, position)
            result = consumer.pull(topic, 0, offset, READ_BATCH)
            if result.status is PullStatus.OFFSET_ILLEGAL and result.next_offset > offset:
                log.warning("held log %s: offsets %d..%d are gone (retention)", topic, offset, result.next_offset)
            read += [m for m in result.messages if m.queue_offset >= offset]
            setattr(self, position, max(offset, result.next_offset))
            if result.status is not PullStatus.FOUND:
                return read

    # -- changes ---------------------------------------------------------------------------

    def read_held(self, offset: int) -> MessageExt | None:
        """A held message by its hold offset, from memory or the topic (a worker thread)."""
        if offset in self.held:
            return self.held[offset]
        for message in self.clients.consumer.pull(self.hold_topic, 0, offset, 1).messages:
            if message.queue_offset == offset:
                return message
        return None

    def mark_done(self, offset: int, outcome: str) -> None:
        """Record that a held message was dealt with (a worker thread, holding ``lock``)."""
        result = self.clients.producer.send(Message(self.done_topic, f"{offset} {outcome}".encode()))
        with self.lock:
            self.done[offset] = (result.queue_offset, outcome)
            self.held.pop(offset, None)

    def outcome(self, offset: int) -> str | None:
        entry = self.done.get(offset)
        return entry[1] if entry else self.ended.get(offset)

    # -- the watermarks ----------------------------------------------------------------------

    def watermarks(self) -> tuple[int, int]:
        with self.lock:
            return self._watermarks()

    def _watermarks(self) -> tuple[int, int]:
        hold_mark = min(self.held, default=self.hold_next)
        for offset in [o for o in self.done if o < hold_mark]:
            self.ended[offset] = self.done.pop(offset)[1]  # a repeated end still gets its answer
        while len(self.ended) > ENDED_KEPT:
            self.ended.popitem(last=False)
        done_mark = min((d for d, _ in self.done.values()), default=self.done_next)
        return hold_mark, done_mark

    def store_watermarks(self) -> None:
        """Store the watermarks if they moved (a worker thread)."""
        marks = self.watermarks()
        if marks == self.marks:
            return
        consumer = self.clients.consumer
        consumer.commit_offset(SYSTEM_GROUP, self.hold_topic, 0, marks[0])
        consumer.commit_offset(SYSTEM_GROUP, self.done_topic, 0, marks[1])
        self.marks = marks


class Holder:
    """A broker's held log as the endpoint uses it: messages are held through it from any
    replica (the topics are made with the first), and it is read and worked on the master
    only, once its topics exist (a broker where nothing was ever held makes no topics)."""

    def __init__(self, clients: Clients, hold_topic: str, done_topic: str, broker: Broker) -> None:
        self.clients = clients
        self.topics = (hold_topic, done_topic)
        self.broker = broker
        self.broker_name = broker.broker_name
        self.log: HeldLog | None = None
        self._made = False
        self._lock = threading.Lock()

    def hold(self, message: Message) -> SendResult:
        """Store a message to hold (a worker thread): where it went in the hold topic."""
        if not self._made:
            admin = self.clients.admin
            for topic in self.topics:
                try:
                    admin.topic_route(topic)
                except (TopicNotExistError, NoRouteInfoError):
                    admin.create_topic(topic, queues=1, brokers=[self.broker_name])
            self._made = True
        properties = message.properties
        copy = Message(self.topics[0], message.body, tags=message.tags, keys=message.keys, properties=properties)
        return self.clients.producer.send(copy)

    def current(self, *, master_only: bool = True) -> HeldLog | None:
        """The held log, read up to now the first time (a worker thread); None on a slave
        (unless ``master_only`` is off) or while its topics are not in the broker's table
        (nothing was ever held: the cluster is not asked at all)."""
        if master_only and not self.broker.is_master():
            self.log = None  # a replica that becomes master reads the log afresh
            return None
        with self._lock:
            if self.log is None and all(map(self.broker.has_topic, self.topics)):
                held = HeldLog(self.clients, *self.topics, self.broker_name)
                held.open()
                self.log = held
            return self.log
