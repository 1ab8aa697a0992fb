"""The dead-letter queue of pop consumption: a message that had its last delivery attempt, or
that a FIFO consumer gave up on, is sent to ``%DLQ%<group>`` as RocketMQ sends it (its origin
topic and message id, its attempts, its client id kept). It leaves the group's in-flight set
only once the dead-letter queue has it, so the group's watermark stays below it until then.
"""

from __future__ import annotations

import asyncio
import logging
import time

from rocketspark.grpcv2.clients import Clients, in_thread
from rocketspark.grpcv2.popstate import GroupTopic, Inflight, PopQueue
from rocketspark.protocol.group_topics import ORIGIN_MESSAGE_ID, RECONSUME_TIME, RETRY_TOPIC, dlq_topic
from rocketspark.protocol.properties import UNIQ_KEY
from rocketspark.protocol.trace import Tracer
from rocketspark.protocol.types import Message

log = logging.getLogger(__name__)


class DeadLetters:
    """Sends a group's messages out of attempts (``max_attempts`` deliveries) to its DLQ."""

    def __init__(self, clients: Clients, max_attempts: int, trace: Tracer) -> None:
        self.clients = clients
        self.max_attempts = max_attempts
        self.trace = trace

    async def drain(self, state: GroupTopic) -> None:
        """Send what had its last attempt to the dead-letter queue. Each stays in flight (the
        watermark below it) until the DLQ has it, and the send finishes even if the receive
        that started it is cancelled."""
        now = time.monotonic()
        for queue in state.queues.values():
            for inflight in queue.expired(now, self.max_attempts):
                await asyncio.shield(asyncio.ensure_future(self.send(state, queue, inflight)))

    async def send(self, state: GroupTopic, queue: PopQueue, inflight: Inflight) -> bool:
        try:
            await in_thread(self._send, state, inflight)
        except Exception as exc:  # kept in flight: dead-lettered again a second later
            log.warning("grpc v2 endpoint: dead-lettering for group %s failed (%s)", state.group, exc)
            queue.not_dead_lettered(inflight, time.monotonic() + 1.0)
            return False
        queue.dead_lettered(inflight)
        state.changed.set()
        if self.trace.traced_topic(state.topic):
            detail = f"after {inflight.attempt} deliveries, to {dlq_topic(state.group)}"
            self.trace.noted("to DLQ", inflight.message, state.group, inflight.consumer, detail)
        return True

    def _send(self, state: GroupTopic, inflight: Inflight) -> None:
        message = inflight.message
        properties = dict(message.properties)
        properties.setdefault(RETRY_TOPIC, state.topic)
        properties.setdefault(ORIGIN_MESSAGE_ID, message.msg_id)
        if message.client_id is not None:  # dead-lettered under the same id, as RocketMQ's copy keeps UNIQ_KEY
            properties.setdefault(UNIQ_KEY, message.client_id)
        properties[RECONSUME_TIME] = str(inflight.attempt - 1)
        target = dlq_topic(state.group)
        copy = Message(target, message.body, tags=message.tags, keys=message.keys, properties=properties)
        self.clients.producer.send(copy)
        log.info(
            "grpc v2 endpoint: message %s of %s went to %s after %d deliveries",
            properties[ORIGIN_MESSAGE_ID],
            state.topic,
            target,
            inflight.attempt,
        )
