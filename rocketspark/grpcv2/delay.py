"""Delay messages (``delivery_timestamp``): held in the broker's timer topic, and sent to their
own topic once their time comes, within a second of it.

The timer topic (``rmq_sys_wheel_timer-<broker>``, RocketMQ's name with the broker's) is a
held log (:mod:`rocketspark.grpcv2.held`): a delay message is stored there with its topic and
time in properties, so it is durable as any message is and invisible in its own topic until it
is delivered. The scheduler, which runs on the master, looks at the log ten times a second; a
due message is sent to its topic with its id, tag, keys, properties and born time, then marked
done. After a restart, what is still held is delivered at its time; one that came due while
the broker was down is delivered at once.

A delay message of a traced topic gives message trace ``scheduled`` when it is held and
``delivered to its topic`` when it is sent there, recorded against its held copy (same client
id: ``Admin.message_trace`` finds it with the delivered one).
"""

from __future__ import annotations

import heapq
import logging
import time
from datetime import UTC, datetime
from typing import Final

from rocketspark.errors import NoRouteInfoError, RocketSparkError, TopicNotExistError
from rocketspark.grpcv2.clients import Clients
from rocketspark.grpcv2.held import Broker, HeldLog, Holder, placed
from rocketspark.protocol.properties import DELIVER_MS, PRODUCER_GROUP, REAL_TOPIC
from rocketspark.protocol.trace import Tracer
from rocketspark.protocol.types import Message, MessageExt

log = logging.getLogger(__name__)

TICK_S: Final = 0.1
RETRY_MS: Final = 1000  # a delivery that failed is tried again this much later
RETRY_GONE_MS: Final = 10_000  # and one whose topic cannot be found
MARKS_EVERY_S: Final = 1.0


def timer_topic(broker_name: str) -> str:
    return f"rmq_sys_wheel_timer-{broker_name}"


def timer_done_topic(broker_name: str) -> str:
    return f"rmq_sys_wheel_timer_done-{broker_name}"


class DelayScheduler:
    def __init__(self, clients: Clients, broker: Broker, trace: Tracer) -> None:
        self.clients = clients
        self.trace = trace
        name = broker.broker_name
        self.holder = Holder(clients, timer_topic(name), timer_done_topic(name), broker)
        self.opened: HeldLog | None = None
        self.due: list[tuple[int, int]] = []  # (deliver at ms, hold offset), a heap
        self._marks_at = 0.0

    def store(self, message: Message, deliver_at_ms: int) -> int:
        """Hold a delay message (a worker thread); its offset in the timer topic."""
        properties = {**message.properties, REAL_TOPIC: message.topic, DELIVER_MS: str(deliver_at_ms)}
        held = Message(message.topic, message.body, tags=message.tags, keys=message.keys, properties=properties)
        result = self.holder.hold(held)
        if self.trace.traced_topic(message.topic):
            due = datetime.fromtimestamp(deliver_at_ms / 1000, UTC).isoformat(timespec="milliseconds")
            detail = f"due at {due} for {message.topic}"
            group = properties.get(PRODUCER_GROUP, "")
            self.trace.noted("scheduled", placed(result, held), group, "", detail)
        return result.queue_offset

    def step(self) -> None:
        """One round (a worker thread): read new delay messages, deliver the due ones."""
        held = self.holder.current()
        if held is None:
            return
        if held is not self.opened:  # (re)opened: everything it holds is waiting
            self.opened = held
            self.due = [(_deliver_at(m), m.queue_offset) for m in held.held.values()]
            heapq.heapify(self.due)
            if held.held:
                log.info("grpc v2 endpoint: %d delay messages held in %s", len(held.held), held.hold_topic)
        for message in held.catch_up():
            heapq.heappush(self.due, (_deliver_at(message), message.queue_offset))
        now = int(time.time() * 1000)
        while self.due and self.due[0][0] <= now:
            _, offset = heapq.heappop(self.due)
            waiting = held.held.get(offset)
            if waiting is not None:
                retry_ms = self._deliver(held, waiting)
                if retry_ms:  # the others due are not held up behind it
                    heapq.heappush(self.due, (now + retry_ms, offset))
        if time.monotonic() - self._marks_at >= MARKS_EVERY_S:
            held.store_watermarks()
            self._marks_at = time.monotonic()

    def _deliver(self, held: HeldLog, message: MessageExt) -> int:
        """Send a due message to its topic and mark it done; 0, or how many ms until the next
        try (it stays held: a topic that cannot be reached now, deleted or not, may be again)."""
        topic = message.properties.get(REAL_TOPIC)
        if not topic:  # not written by an endpoint (sent to the system topic by hand): not ours to send
            log.warning(
                "grpc v2 endpoint: %s offset %d is no delay message; skipped", held.hold_topic, message.queue_offset
            )
            held.mark_done(message.queue_offset, "malformed")
            return 0
        properties = {k: v for k, v in message.properties.items() if k != REAL_TOPIC}  # its due time stays: delay
        out = Message(topic, message.body, tags=message.tags, keys=message.keys, properties=properties)
        try:
            sent = self.clients.producer.send(out, born_ms=message.born_timestamp)
        except (TopicNotExistError, NoRouteInfoError) as exc:
            log.warning("grpc v2 endpoint: a delay message for %s waits: %s", topic, exc)
            return RETRY_GONE_MS
        except RocketSparkError as exc:
            log.warning("grpc v2 endpoint: a delay message for %s waits: %s", topic, exc)
            return RETRY_MS
        held.mark_done(message.queue_offset, "delivered")
        if self.trace.traced_topic(topic):
            detail = f"{topic} queue {sent.queue_id} offset {sent.queue_offset} on {sent.broker_name}"
            self.trace.noted("delivered to its topic", message, "", "", detail)
        return 0


def _deliver_at(message: MessageExt) -> int:
    return int(message.properties.get(DELIVER_MS, "0"))
