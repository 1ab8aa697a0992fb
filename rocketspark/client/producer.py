"""The producer: choose a queue, send, retry on another broker when a broker fails.

Queue selection follows RocketMQ's ``DefaultMQProducer``: round-robin over the topic's
writable queues, or ``crc32(sharding_key) % queues`` so that one key always lands on one
queue (and stays ordered), or a fixed ``queue_id``. A failed send is retried
``retry_times_when_send_failed`` more times (default 2), each time on a queue of another
broker; sends pinned to a queue by key or id are retried on the same queue, because moving
them would break their order.

If the nameserver has no route for the topic, the producer looks for the auto-create
template ``TBW102`` and, when some broker offers it, sends with it as template: that broker
creates the topic with ``min(default_topic_queue_nums, TBW102 queues)`` queues (seed 004
explains the pitfalls; prefer ``Admin.create_topic``).
"""

from __future__ import annotations

import concurrent.futures
import itertools
import logging
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

from rocketspark.client.base import ClientBase
from rocketspark.client.routes import AUTO_CREATE_TOPIC, QueueRef, write_queues
from rocketspark.errors import (
    ConnectError,
    MessageTooLargeError,
    NoPermissionError,
    NoRouteInfoError,
    RocketSparkError,
    TopicNotExistError,
)
from rocketspark.protocol.codec import encode_send_batch, message_payload
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.types import Message, QueueData, SendResult, SendStatus, TopicRouteData
from rocketspark.protocol.validation import validate_topic_name

log = logging.getLogger(__name__)

MiB = 1024 * 1024
# Errors after which another broker may succeed (RocketMQ's retryResponseCodes, plus transport).
RETRY_ON = (ConnectError, NoPermissionError, TopicNotExistError)


@dataclass(frozen=True, slots=True)
class PublishInfo:
    route: TopicRouteData
    queues: list[QueueRef]  # writable now: what round robin picks from
    stable: list[QueueRef]  # every write queue, writable or not: what keys and ids index
    template: str | None  # "TBW102" when sending through the auto-create template


class Producer(ClientBase):
    """Synchronous-first producer; ``send_async`` and ``send_oneway`` for the other two modes."""

    def __init__(
        self,
        nameserver: str | list[str] | None = None,
        *,
        send_timeout_ms: int = 3000,
        retry_times_when_send_failed: int = 2,
        default_topic_queue_nums: int = 4,
        max_message_bytes: int = 4 * MiB,
        batch_max_bytes: int = 4 * MiB,
        create_topic_key: str = AUTO_CREATE_TOPIC,
        poll_interval_ms: int = 30_000,
    ) -> None:
        super().__init__(nameserver, timeout_ms=send_timeout_ms, poll_interval_ms=poll_interval_ms)
        self.retry_times_when_send_failed = retry_times_when_send_failed
        self.default_topic_queue_nums = default_topic_queue_nums
        self.max_message_bytes = max_message_bytes
        self.batch_max_bytes = batch_max_bytes
        self.create_topic_key = create_topic_key
        self._round_robin = itertools.count()
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None

    # -- routes ---------------------------------------------------------------------------------

    def publish_info(self, topic: str) -> PublishInfo:
        """Writable queues of a topic, or of the auto-create template when the topic is new."""
        try:
            route = self.routes.get(topic)
        except NoRouteInfoError as missing:
            template = self._template_route()
            if template is None:
                raise NoRouteInfoError(
                    f"{missing.message}; no broker offers auto-creation either (auto_create_topic_enable is off). "
                    f"Create it with `rocketspark admin create-topic {topic}`",
                    topic=topic,
                ) from None
            queues = write_queues(template)
            return PublishInfo(template, queues, queues, self.create_topic_key)
        queues = write_queues(route)
        stable = write_queues(route, writable_only=False)
        if not stable:
            raise NoRouteInfoError(f'No route info of this topic "{topic}": its route lists no queues', topic=topic)
        return PublishInfo(route, queues, stable, None)

    def _template_route(self) -> TopicRouteData | None:
        try:
            route = self.routes.fetch(self.create_topic_key)
        except RocketSparkError:
            return None
        shrunk = tuple(
            QueueData(
                q.broker_name,
                min(self.default_topic_queue_nums, q.read_queue_nums),
                min(self.default_topic_queue_nums, q.read_queue_nums),
                q.perm,
            )
            for q in route.queues
        )
        return TopicRouteData(route.topic, route.brokers, shrunk)

    # -- selection ------------------------------------------------------------------------------

    def _pinned(self, message: Message, queues: list[QueueRef]) -> QueueRef | None:
        """The queue a message is pinned to by id or key, indexing every write queue so that
        a broker losing write permission makes its keys fail instead of silently moving."""
        if message.queue_id is not None:
            if not 0 <= message.queue_id < len(queues):
                raise NoRouteInfoError(
                    f'queue {message.queue_id} does not exist: topic "{message.topic}" has {len(queues)} '
                    "writable queues"
                )
            return queues[message.queue_id]
        if message.sharding_key is not None:
            return queues[zlib.crc32(message.sharding_key.encode()) % len(queues)]
        return None

    def _next(self, queues: list[QueueRef], avoid: str | None) -> QueueRef:
        if not queues:
            raise NoPermissionError(
                "none of the topic's brokers accepts writes now (write permission wiped on all of them); "
                "add it back with `rocketspark admin add-write-perm <broker>`"
            )
        for _ in range(len(queues)):
            ref = queues[next(self._round_robin) % len(queues)]
            if ref.broker_name != avoid:
                return ref
        return queues[next(self._round_robin) % len(queues)]

    # -- validation -----------------------------------------------------------------------------

    def _check(self, message: Message) -> None:
        validate_topic_name(message.topic)
        if len(message.body) > self.max_message_bytes:
            raise MessageTooLargeError(
                f"message body is {len(message.body)} bytes, over the producer's limit of {self.max_message_bytes} "
                "bytes (max_message_bytes); split the payload or raise the limit on producer and broker"
            )

    # -- sending --------------------------------------------------------------------------------

    def _request(self, info: PublishInfo, topic: str, ref: QueueRef, body: bytes, batch: bool) -> RemotingCommand:
        ext: dict[str, object] = {"topic": topic, "queueId": ref.queue_id}
        if info.template:
            ext["defaultTopic"] = info.template
            ext["defaultTopicQueueNums"] = self.default_topic_queue_nums
        code = RequestCode.SEND_BATCH_MESSAGE if batch else RequestCode.SEND_MESSAGE
        return RemotingCommand.request(code, ext, body)

    def _result(self, topic: str, ref: QueueRef, response: RemotingCommand) -> SendResult:
        ext = response.ext
        return SendResult(
            status=SendStatus(ext.get("status", "SEND_OK")),
            msg_id=str(ext["msgId"]),
            topic=topic,
            broker_name=ref.broker_name,
            queue_id=int(ext["queueId"]),
            queue_offset=int(ext["queueOffset"]),
            count=int(ext.get("count", 1)),
        )

    def _send_body(
        self, topic: str, body: bytes, pinned: Message | None, batch: bool, timeout_ms: int | None
    ) -> SendResult:
        """Send one request body, retrying on other brokers; ``pinned`` fixes the queue."""
        attempts = 1 + max(0, self.retry_times_when_send_failed)
        avoid: str | None = None
        last_error: RocketSparkError | None = None
        for attempt in range(attempts):
            info = self.publish_info(topic)
            ref = (self._pinned(pinned, info.stable) if pinned else None) or self._next(info.queues, avoid)
            try:
                address = self.broker_address(info.route, ref.broker_name)
                request = self._request(info, topic, ref, body, batch)
                response = self.call(address, request, timeout_ms)
            except RETRY_ON as exc:
                last_error = exc
                avoid = ref.broker_name
                self.routes.invalidate(topic)
                log.debug("send to %s failed (attempt %d/%d): %s", ref.broker_name, attempt + 1, attempts, exc)
                continue
            if info.template:
                self.routes.invalidate(topic)  # the topic exists now; learn its real route next time
            return self._result(topic, ref, response)
        assert last_error is not None
        raise last_error

    def send(self, message: Message, *, timeout_ms: int | None = None) -> SendResult:
        """Send one message and wait for the broker's acknowledgement."""
        self._check(message)
        body = encode_send_batch([message])
        pinned = message if message.queue_id is not None or message.sharding_key is not None else None
        return self._send_body(message.topic, body, pinned, False, timeout_ms)

    def send_batch(self, messages: Sequence[Message], *, timeout_ms: int | None = None) -> list[SendResult]:
        """Send many messages in as few requests as the byte limit allows.

        Messages are grouped by topic (and by queue for keyed or pinned ones) in their original
        order, split into requests of at most ``batch_max_bytes``, and each request is stored
        on one queue. Returns one SendResult per request; each covers ``count`` consecutive
        messages from ``queue_offset`` on.
        """
        results: list[SendResult] = []
        for topic, pinned, group in self._groups(messages):
            for chunk in self._chunks(group):
                body = encode_send_batch([], payloads=chunk)
                results.append(self._send_body(topic, body, pinned, True, timeout_ms))
        return results

    def _groups(self, messages: Sequence[Message]) -> list[tuple[str, Message | None, list[bytes]]]:
        groups: dict[tuple[str, object], tuple[Message | None, list[bytes]]] = {}
        for message in messages:
            self._check(message)
            if message.queue_id is not None:
                key: tuple[str, object] = (message.topic, ("id", message.queue_id))
            elif message.sharding_key is not None:
                key = (message.topic, ("key", zlib.crc32(message.sharding_key.encode())))
            else:
                key = (message.topic, None)
            pinned = message if key[1] is not None else None
            groups.setdefault(key, (pinned, []))[1].append(message_payload(message))
        return [(topic, pinned, payloads) for (topic, _), (pinned, payloads) in groups.items()]

    def _chunks(self, payloads: list[bytes]) -> list[list[bytes]]:
        chunks: list[list[bytes]] = [[]]
        size = 0
        for payload in payloads:
            if chunks[-1] and size + len(payload) > self.batch_max_bytes:
                chunks.append([])
                size = 0
            chunks[-1].append(payload)
            size += len(payload) + 16
        return chunks

    def send_async(self, message: Message, *, timeout_ms: int | None = None) -> concurrent.futures.Future[SendResult]:
        """Send without blocking; the future resolves to the SendResult or the error."""
        if self._executor is None:
            self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix="producer")
        return self._executor.submit(self.send, message, timeout_ms=timeout_ms)

    def send_oneway(self, message: Message) -> None:
        """Send without waiting for any answer: fastest, and a failure goes unnoticed."""
        self._check(message)
        info = self.publish_info(message.topic)
        ref = self._pinned(message, info.stable) or self._next(info.queues, None)
        request = self._request(info, message.topic, ref, encode_send_batch([message]), False)
        self.remoting.invoke_oneway(self.broker_address(info.route, ref.broker_name), request)

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True)
        super().close()
