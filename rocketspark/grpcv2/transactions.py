"""Transactional messages: a half message is held until ``EndTransaction`` commits it (it is
then sent to its topic) or rolls it back; one whose outcome never comes is checked back with a
producer of its topic.

Half messages live in the broker's half topic, ``RMQ_SYS_TRANS_HALF_TOPIC-<broker>``, and their
outcomes in ``RMQ_SYS_TRANS_OP_HALF_TOPIC-<broker>`` (RocketMQ's names with the broker's): a
held log (:mod:`rocketspark.grpcv2.held`). A half message is never in its own topic, so no
consumer, Spark included, can see it before it is committed.

The transaction id is ``<broker>:<half offset>``, and ``EndTransaction`` is sent to the endpoint
that took the half message (the official clients send it to the send's endpoint). Check-back is
RocketMQ's: a half message older than ``transaction_timeout_ms`` with no outcome is asked about
(``RecoverOrphanedTransactionCommand`` on a ``Telemetry`` stream of a producer that publishes its
topic) every ``transaction_check_interval_ms``; after ``transaction_check_max`` checks it is
discarded, with a warning naming it.

A half message of a traced topic gives message trace ``prepared`` when it is held, then
``checked`` for each check-back, and ``committed``, ``rolled back`` or ``discarded``, recorded
against its held copy (same client id as the committed message: ``Admin.message_trace`` finds
both). These are the same for 4.x clients (``broker.rocketmq4.held``) and v5 clients.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from rocketspark.grpcv2.clients import Clients
from rocketspark.grpcv2.held import Broker, Holder, placed
from rocketspark.grpcv2.stubs import definition_pb2 as pb
from rocketspark.grpcv2.translate import Refused
from rocketspark.protocol.properties import PRODUCER_GROUP, REAL_TOPIC, TRANSACTION_PREPARED, UNIQ_KEY
from rocketspark.protocol.trace import Tracer
from rocketspark.protocol.types import Message, MessageExt, SendResult

log = logging.getLogger(__name__)

COMMIT, ROLLBACK, DISCARD = "commit", "rollback", "discard"
# Ask a producer of ``topic`` about a half message: whether one was there to ask.
Ask = Callable[[str, MessageExt, str], bool]


@dataclass(frozen=True, slots=True)
class CheckRules:
    """When half messages are checked back (``transaction_*`` keys of ``broker.config``, where
    their defaults are: RocketMQ's)."""

    timeout_ms: int  # transactionTimeOut
    interval_ms: int  # transactionCheckInterval
    max_checks: int  # transactionCheckMax


def half_topic(broker_name: str) -> str:
    return f"RMQ_SYS_TRANS_HALF_TOPIC-{broker_name}"


def op_topic(broker_name: str) -> str:
    return f"RMQ_SYS_TRANS_OP_HALF_TOPIC-{broker_name}"


class Transactions:
    def __init__(self, clients: Clients, broker: Broker, rules: CheckRules, trace: Tracer) -> None:
        self.clients = clients
        self.trace = trace
        self.broker_name = broker.broker_name
        self.rules = rules
        self.holder = Holder(clients, half_topic(self.broker_name), op_topic(self.broker_name), broker)
        self.checks: dict[int, tuple[int, float]] = {}  # half offset -> (checks made, next check at, s)
        self.ending: set[int] = set()  # half offsets an EndTransaction is sending now

    def half(self, message: Message) -> str:
        """Hold a half message (a worker thread); its transaction id."""
        return self.transaction_id(self.hold_half(message).queue_offset)

    def hold_half(self, message: Message) -> SendResult:
        """Hold a half message (a worker thread): where it went in the half topic."""
        properties = {**message.properties, REAL_TOPIC: message.topic}
        half = Message(message.topic, message.body, tags=message.tags, keys=message.keys, properties=properties)
        result = self.holder.hold(half)
        self._note("prepared", placed(result, half), f"transaction {self.transaction_id(result.queue_offset)}")
        return result

    def _note(self, kind: str, half: MessageExt, detail: str) -> None:
        """A step of a half message's life, for message trace if its topic is traced."""
        topic = half.properties.get(REAL_TOPIC, "")
        if topic and self.trace.traced_topic(topic):
            self.trace.noted(kind, half, half.properties.get(PRODUCER_GROUP, ""), "", f"{detail} ({topic})")

    def transaction_id(self, half_offset: int) -> str:
        return f"{self.broker_name}:{half_offset}"

    def end(self, transaction_id: str, topic: str, message_id: str, commit: bool) -> None:
        """Commit or roll back (a worker thread). Ending it again the same way is fine."""
        offset = self._offset(transaction_id)
        held = self.holder.current(master_only=False)
        if held is None:
            raise Refused(pb.Code.INVALID_TRANSACTION_ID, f"no half message was ever sent to {self.broker_name}")
        wanted = COMMIT if commit else ROLLBACK
        with held.lock:  # who ends it is settled here; the send is made outside the lock
            outcome = held.outcome(offset)
            if outcome is not None:
                if outcome != wanted:
                    raise Refused(pb.Code.INVALID_TRANSACTION_ID, f"transaction {transaction_id} was {_past(outcome)}")
                return
            if offset in self.ending:
                raise Refused(pb.Code.INVALID_TRANSACTION_ID, f"transaction {transaction_id} is being ended now")
            if offset < held.hold_next and offset not in held.held:
                raise Refused(pb.Code.INVALID_TRANSACTION_ID, f"transaction {transaction_id} was ended long ago")
            message = held.read_held(offset)
            if (
                message is None
                or message.properties.get(REAL_TOPIC) != topic
                or (message_id and message.properties.get(UNIQ_KEY, message_id) != message_id)
            ):
                raise Refused(
                    pb.Code.INVALID_TRANSACTION_ID,
                    f"no half message {message_id} of topic {topic!r} has transaction {transaction_id}",
                )
            self.ending.add(offset)
        try:
            detail = "by its producer"
            if commit:
                sent = self.clients.producer.send(_released(message), born_ms=message.born_timestamp)
                detail = f"sent to queue {sent.queue_id} offset {sent.queue_offset} on {sent.broker_name}"
            held.mark_done(offset, wanted)
            self._note(_past(wanted), message, detail)
        finally:
            with held.lock:
                self.ending.discard(offset)
                self.checks.pop(offset, None)

    def _offset(self, transaction_id: str) -> int:
        broker, _, offset = transaction_id.rpartition(":")
        if broker != self.broker_name or not (offset.isascii() and offset.isdigit()):
            raise Refused(
                pb.Code.INVALID_TRANSACTION_ID,
                f"transaction id {transaction_id!r} is not one this endpoint ({self.broker_name}) gave; end a "
                "transaction at the endpoint its half message was sent to",
            )
        return int(offset)

    def step(self, ask: Ask) -> None:
        """One round (a worker thread): read new half messages, check back the old ones."""
        held = self.holder.current()
        if held is None:
            return
        held.catch_up()
        now_ms, now = int(time.time() * 1000), time.monotonic()
        with held.lock:
            waiting = [
                m
                for m in held.held.values()
                if now_ms - m.store_timestamp >= self.rules.timeout_ms and m.queue_offset not in self.ending
            ]
        for message in waiting:
            if not message.properties.get(REAL_TOPIC):  # not written by an endpoint: not ours to check
                log.warning(
                    "grpc v2 endpoint: %s offset %d is no half message; skipped", held.hold_topic, message.queue_offset
                )
                held.mark_done(message.queue_offset, "malformed")
                continue
            made, next_at = self.checks.get(message.queue_offset, (0, 0.0))
            if now < next_at:
                continue
            if made >= self.rules.max_checks:
                log.warning(
                    "grpc v2 endpoint: half message %s of %s discarded after %d checks without an outcome",
                    message.properties.get(UNIQ_KEY),
                    message.properties.get(REAL_TOPIC),
                    made,
                )
                held.mark_done(message.queue_offset, DISCARD)
                self.checks.pop(message.queue_offset, None)
                self._note("discarded", message, f"no outcome after {made} checks")
                continue
            transaction_id = self.transaction_id(message.queue_offset)
            asked = ask(message.properties[REAL_TOPIC], message, transaction_id)
            self._note("checked", message, f"check {made + 1}: {'asked a producer' if asked else 'no producer to ask'}")
            if not asked:  # counted all the same (RocketMQ)
                log.debug(
                    "grpc v2 endpoint: no producer of %s to check %s with",
                    message.properties[REAL_TOPIC],
                    transaction_id,
                )
            self.checks[message.queue_offset] = (made + 1, now + self.rules.interval_ms / 1000)
        held.store_watermarks()


def _released(message: MessageExt) -> Message:
    """A committed half message as its topic gets it: a transaction message (for the metrics'
    message_type, where it is counted, its held copy being the broker's own write)."""
    properties = {k: v for k, v in message.properties.items() if k != REAL_TOPIC}
    properties[TRANSACTION_PREPARED] = "true"
    return Message(
        message.properties[REAL_TOPIC], message.body, tags=message.tags, keys=message.keys, properties=properties
    )


def _past(outcome: str) -> str:
    return {COMMIT: "committed", ROLLBACK: "rolled back", DISCARD: "discarded after its checks"}.get(outcome, outcome)
