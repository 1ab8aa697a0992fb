"""A consumer group's pop state on one logical queue: what it was handed and not acknowledged.

RocketMQ 5's POP model, kept on our offset model. The group's committed offset (stored on the
broker as any group's is) is the *watermark*: every message below it was acknowledged or
dead-lettered. Above it the endpoint keeps, in memory:

- ``pending``: messages read from the queue and not handed out yet;
- ``inflight``: messages handed out and not acknowledged, each invisible until its deadline,
  with its delivery attempt and the receipt handle of its latest delivery.

A message whose invisibility ends, or whose consumer is gone (``release``: the client died or
closed), is handed out again with its attempt raised; one that has had its last attempt is given
back by ``expired`` to go to the dead-letter queue. After a restart the
endpoint reads again from the watermark: a message acknowledged above it is delivered again
(never lost), with its attempts counted afresh.

Order per message group: a message with a message group is not handed out while an earlier one
of the same group from this queue is in flight, so a group's messages are consumed in order
by every consumer, FIFO or not.

Priority (RocketMQ 5.4, RIP-80): once a queue has had a priority message, its visible messages
(those read ahead and those visible again) are handed out higher priority first, then in
offset order; a message without a priority comes after every priority, as RocketMQ's
``getPriority()`` of -1 says. RocketMQ puts a priority message in the queue of its priority, so
there it is the queue that orders them (the endpoint serves the highest queue first); here the
messages of one queue are ordered too, those above the topic's highest queue included.

Pure logic, no I/O: the endpoint fetches and commits (:mod:`rocketspark.grpcv2.pop`).
``GroupTopic`` gathers a group's queues of one topic.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from dataclasses import dataclass, field

from rocketspark.protocol.properties import PRIORITY, SHARDING_KEY, priority_of
from rocketspark.protocol.types import MessageExt


@dataclass(slots=True)
class Inflight:
    message: MessageExt
    attempt: int  # 1 for the first delivery
    visible_at: float  # monotonic seconds
    handle: str  # the receipt handle of its latest delivery
    consumer: str = ""  # the client id its latest delivery went to (made visible again when it is gone)
    renew: bool = False  # a PushConsumer's (auto renew): kept invisible while its consumer lives
    renew_until: float = 0.0  # but not past this (monotonic)
    dead: bool = False  # on its way to the dead-letter queue: not handed out, still in flight


@dataclass(frozen=True, slots=True)
class Receipt:
    """What a receipt handle names: a queue, an offset and one delivery of it."""

    queue_id: int
    offset: int
    nonce: str

    def encode(self) -> str:
        return f"{self.queue_id}.{self.offset}.{self.nonce}"

    @staticmethod
    def decode(handle: str) -> Receipt | None:
        parts = handle.split(".")
        if len(parts) != 3 or not _decimal(parts[0]) or not _decimal(parts[1]) or not parts[2]:
            return None
        return Receipt(int(parts[0]), int(parts[1]), parts[2])


@dataclass(slots=True)
class PopQueue:
    queue_id: int
    next_offset: int  # the first offset not read into pending yet
    committed: int  # the watermark last stored on the broker
    pending: list[MessageExt] = field(default_factory=list)  # in offset order
    inflight: dict[int, Inflight] = field(default_factory=dict)
    prioritized: bool = False  # it had a priority message: higher priority first

    def watermark(self) -> int:
        """Everything below is acknowledged or dead-lettered."""
        low = self.next_offset
        if self.pending:
            low = min(low, self.pending[0].queue_offset)
        if self.inflight:
            low = min(low, min(self.inflight))
        return low

    def add(self, messages: list[MessageExt], next_offset: int) -> None:
        """Messages read from the queue at ``next_offset``'s predecessor range."""
        fresh = [m for m in messages if m.queue_offset >= self.next_offset]
        self.pending.extend(fresh)
        self.next_offset = max(self.next_offset, next_offset)
        self.prioritized = self.prioritized or any(PRIORITY in m.properties for m in fresh)

    def expired(self, now: float, max_attempts: int) -> list[Inflight]:
        """In-flight messages whose invisibility ended after their last attempt, marked dead:
        they go to the dead-letter queue, and stay in flight (below nothing acknowledged) until
        it has them (``dead_lettered``) or the send failed (``not_dead_lettered``)."""
        done = [f for f in self.inflight.values() if not f.dead and f.visible_at <= now and f.attempt >= max_attempts]
        for f in done:
            f.dead = True
        return done

    def dead_lettered(self, f: Inflight) -> None:
        if self.inflight.get(f.message.queue_offset) is f:
            del self.inflight[f.message.queue_offset]

    @staticmethod
    def not_dead_lettered(f: Inflight, retry_at: float) -> None:
        f.dead, f.visible_at = False, retry_at  # its last attempt stays the last: dead-lettered again then

    def take(self, wanted: int, now: float, invisible_s: float, max_attempts: int, max_inflight: int) -> list[Inflight]:
        """Up to ``wanted`` messages to hand out now: those whose invisibility ended first (the
        oldest first), then new ones while fewer than ``max_inflight`` are out; none that an
        earlier one of its message group holds up, none that had its last attempt. In a queue
        that had priority messages, higher priority first within each of the two."""
        busy = {_group(f.message) for f in self.inflight.values() if f.visible_at > now or f.dead}
        busy.discard(None)
        taken: list[Inflight] = []
        for f in sorted(self.inflight.values(), key=lambda f: self._order(f.message)):
            if len(taken) >= wanted:
                return taken
            group = _group(f.message)
            if f.visible_at > now or f.dead or f.attempt >= max_attempts or group in busy:
                continue
            f.attempt += 1
            taken.append(self._deliver(f, now, invisible_s))
            if group is not None:
                busy.add(group)
        for message in sorted(self.pending, key=self._order) if self.prioritized else self.pending:
            group = _group(message)
            if len(taken) >= wanted or len(self.inflight) >= max_inflight:
                break
            if group in busy:
                continue
            fresh = Inflight(message, 1, 0.0, "")
            self.inflight[message.queue_offset] = fresh
            taken.append(self._deliver(fresh, now, invisible_s))
            if group is not None:
                busy.add(group)
        if taken:
            self.pending = [m for m in self.pending if m.queue_offset not in self.inflight]
        return taken

    def _order(self, message: MessageExt) -> tuple[int, int]:
        """Offset order, or in a queue that had priority messages higher priority first."""
        if not self.prioritized:
            return (0, message.queue_offset)
        priority = priority_of(message.properties)
        return (1 if priority is None else -priority, message.queue_offset)

    def _deliver(self, f: Inflight, now: float, invisible_s: float) -> Inflight:
        f.visible_at = now + invisible_s
        f.handle = Receipt(self.queue_id, f.message.queue_offset, secrets.token_hex(6)).encode()
        return f

    def find(self, receipt: Receipt) -> Inflight | None:
        """The in-flight message a receipt handle names, if that delivery is its latest."""
        f = self.inflight.get(receipt.offset)
        return f if f is not None and f.handle == receipt.encode() else None

    def ack(self, receipt: Receipt) -> bool:
        found = self.find(receipt)
        if found is None or found.dead:
            return False
        del self.inflight[receipt.offset]
        return True

    def change_invisible(self, receipt: Receipt, now: float, invisible_s: float) -> Inflight | None:
        """Make a delivery invisible for ``invisible_s`` from now, under a new receipt handle;
        no longer renewed (a PushConsumer's nack: it comes back after its backoff)."""
        f = self.find(receipt)
        if f is None or f.dead:
            return None
        f.renew = False
        return self._deliver(f, now, invisible_s)

    def release(self, consumer: str, now: float) -> int:
        """Make what ``consumer`` holds visible now (it is gone): each goes to the next receive,
        its attempt raised as for any redelivery; its receipt handle acknowledges it until then.
        How many."""
        released = 0
        for f in self.inflight.values():
            if f.consumer == consumer and not f.dead:
                f.visible_at = min(f.visible_at, now)
                f.consumer, f.renew = "", False
                released += 1
        return released


def _decimal(text: str) -> bool:
    return text.isascii() and text.isdigit()


def _group(message: MessageExt) -> str | None:
    return message.properties.get(SHARDING_KEY) or None


@dataclass(slots=True)
class GroupTopic:
    group: str
    topic: str
    queues: dict[int, PopQueue]
    filling: asyncio.Lock = field(default_factory=asyncio.Lock)
    changed: asyncio.Event = field(default_factory=asyncio.Event)  # an ack may free a message group
    idle_until: float = 0.0  # the last read found nothing new: the next not before this (monotonic)
    owned: set[int] = field(default_factory=set)  # the queues whose lock this endpoint holds
    used_at: float = field(default_factory=time.monotonic)  # the last receive
