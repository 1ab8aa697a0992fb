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
import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Final, Protocol, Unpack

from rocketspark.client.base import ClientBase, ClientKwargs
from rocketspark.client.fault import LATENCY_MAX_MS, NOT_AVAILABLE_MS, LatencyFaultTolerance
from rocketspark.client.heartbeats import DEFAULT_PRODUCER_GROUP, ProducerHeartbeats
from rocketspark.client.route_push import new_client_id
from rocketspark.client.selection import (
    Pin,
    PublishInfo,
    RoundRobin,
    Target,
    no_master,
    pin_of,
    publish_info_of,
    template_info,
)
from rocketspark.client.send_retries import RETRIABLE, RETRY_ON, SendRetries, attempt_timeout_ms
from rocketspark.client.send_wire import send_request, send_result, stamp_sharding_keys
from rocketspark.codec.build import chunk_messages, encode_messages, encode_sent
from rocketspark.codec.layout import COMPRESSIONS
from rocketspark.codec.survey import Survey, survey
from rocketspark.errors import (
    ClientError,
    InvalidParameterError,
    MessageTooLargeError,
    NoRouteInfoError,
    NotMasterError,
    RocketSparkError,
)
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.types import Message, SendResult, TopicRouteData
from rocketspark.protocol.validation import AUTO_CREATE_TOPIC, DEFAULT_TOPIC_QUEUE_NUMS, validate_topic_name
from rocketspark.remoting.client import LocalPeer, check

log = logging.getLogger(__name__)
MASTER_WATCH_S = 0.05  # how often a send waiting on a replica group's master looks for a new one

MiB = 1024 * 1024
RETRY_TIMES_WHEN_SEND_FAILED: Final = 2  # RocketMQ's retryTimesWhenSendFailed (the Spark sink's retryTimes too)
BATCH_MAX_BYTES: Final = 4 * MiB  # the largest batch record one send carries (and the sink's batchMaxBytes)


class PoolFactory(Protocol):
    """Makes the executor ``send_async`` runs sends on, once, on its first call (a producer
    that never sends asynchronously starts no threads); the producer shuts it down on close."""

    def __call__(self) -> concurrent.futures.Executor: ...


def send_pool() -> concurrent.futures.Executor:
    """The default ``send_async_pool``: eight threads."""
    return concurrent.futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix="producer")


@dataclass(frozen=True, slots=True)
class FirstAttempt:
    """The request a send would make first, and where (``Producer.first_attempt``)."""

    address: str
    request: RemotingCommand
    topic: str
    target: Target
    own_ids: dict[int, str] | None = None  # the message's own UNIQ_KEY, if it has one


class Producer(ClientBase):
    """Synchronous-first producer; ``send_async`` and ``send_oneway`` for the other two modes."""

    def __init__(
        self,
        nameserver: str | list[str] | None = None,
        *,
        send_timeout_ms: int = 3000,
        send_attempt_timeout_ms: int | None = None,
        retry_times_when_send_failed: int = RETRY_TIMES_WHEN_SEND_FAILED,
        default_topic_queue_nums: int = DEFAULT_TOPIC_QUEUE_NUMS,
        max_message_bytes: int = 4 * MiB,
        batch_max_bytes: int = BATCH_MAX_BYTES,
        compression: str = "none",
        create_topic_key: str = AUTO_CREATE_TOPIC,
        auto_create_topics: bool = True,
        send_latency_fault_enable: bool = False,
        latency_max_ms: Sequence[int] = LATENCY_MAX_MS,
        not_available_duration_ms: Sequence[int] = NOT_AVAILABLE_MS,
        send_async_pool: PoolFactory = send_pool,
        local: LocalPeer | None = None,
        group: str | None = DEFAULT_PRODUCER_GROUP,
        **options: Unpack[ClientKwargs],
    ) -> None:
        super().__init__(nameserver, timeout_ms=send_timeout_ms, local=local, **options)
        self.group = group  # announced to each broker sent to (Admin.producer_connections); None: not announced
        self.client_id = new_client_id()
        self.heartbeats = ProducerHeartbeats(self.remoting, group, self.client_id)
        # RocketMQ's sendLatencyFaultEnable (off by default there too): slow or failed brokers
        # are avoided for a while, by the latency table of rocketspark.client.fault.
        self.fault = (
            LatencyFaultTolerance(latency_max_ms, not_available_duration_ms) if send_latency_fault_enable else None
        )
        if send_attempt_timeout_ms is not None and send_attempt_timeout_ms <= 0:
            raise InvalidParameterError(
                "send_attempt_timeout_ms must be positive (or None: a share of the send timeout)"
            )
        self.send_attempt_timeout_ms = send_attempt_timeout_ms
        self.retry_times_when_send_failed = retry_times_when_send_failed
        self.default_topic_queue_nums = default_topic_queue_nums
        self.max_message_bytes = max_message_bytes
        self.batch_max_bytes = batch_max_bytes
        if compression not in COMPRESSIONS:
            raise InvalidParameterError(f'compression must be one of {", ".join(COMPRESSIONS)}, not "{compression}"')
        self.compression = COMPRESSIONS[compression]  # of each batch's message section
        self.create_topic_key = create_topic_key
        self.auto_create_topics = auto_create_topics  # False: a send to a missing topic fails, even if brokers allow
        self._selector = RoundRobin(self.fault)
        self._make_pool = send_async_pool
        self._executor: concurrent.futures.Executor | None = None  # send_async's, made on first use
        self._executor_lock = threading.Lock()
        self._accepting = True  # False once close() began: send_async refuses instead of making a new pool

    # -- routes ---------------------------------------------------------------------------------

    def publish_info(self, topic: str) -> PublishInfo:
        """Writable queues of a topic, or of the auto-create template when the topic is new.
        Computed once per cached route (``RouteCache.derive``)."""
        try:
            self.routes.get(topic)
        except NoRouteInfoError as missing:
            template = self._template_route()
            if template is None:
                why = (
                    "no broker offers auto-creation either (auto_create_topic_enable is off)"
                    if self.auto_create_topics
                    else "this producer creates no topic (auto_create_topics=False)"
                )
                # the route cache says how to create a topic the nameserver does not know
                raise NoRouteInfoError(f"{missing.message}; {why}", topic=topic) from None
            return template_info(template, self.create_topic_key, self.default_topic_queue_nums)
        return self.routes.derive(topic, publish_info_of)

    def _template_route(self) -> TopicRouteData | None:
        if not self.auto_create_topics:
            return None
        try:
            return self.routes.get(self.create_topic_key)  # cached, "missing" too (seed 000)
        except RocketSparkError:
            return None

    # -- selection ------------------------------------------------------------------------------

    def _target(self, info: PublishInfo, pin: Pin | None, avoid: str | None) -> Target:
        """Where an attempt goes: the pinned queue (by id, or by sharding key), else the next
        writable queue in turn. With none writable because replica groups are electing
        masters, NotMasterError: the send waits for one within its timeout."""
        if pin is not None:
            return pin.target(info.stable)
        if not info.queues and info.electing:
            raise no_master(info.route.topic, info.electing)
        return self._next(info.queues, avoid)

    def _next(self, queues: list[Target], avoid: str | None) -> Target:
        return self._selector.next(queues, avoid)

    # -- validation -----------------------------------------------------------------------------

    def _check_all(self, topic: str, messages: Sequence[Message], largest: int) -> None:
        """``_check`` of one topic's messages, whose largest body has ``largest`` bytes."""
        stamp_sharding_keys(messages)
        if not self.routes.has_route(topic):
            validate_topic_name(topic)
        if largest > self.max_message_bytes:
            for message in messages:
                self._check(message)  # raises, naming the first one over

    def _check(self, message: Message) -> None:
        stamp_sharding_keys((message,))
        if not self.routes.has_route(message.topic):  # a cached route's name was accepted by the cluster
            validate_topic_name(message.topic)
        if len(message.body) > self.max_message_bytes:
            raise MessageTooLargeError(
                f"message body is {len(message.body)} bytes, over the producer's limit of {self.max_message_bytes} "
                "bytes (max_message_bytes); split the payload or raise the limit on producer and broker"
            )

    # -- sending --------------------------------------------------------------------------------

    def _send_body(
        self,
        topic: str,
        body: bytes,
        pin: Pin | None,
        batch: bool,
        timeout_ms: int | None,
        own: dict[int, str] | None = None,
    ) -> SendResult:
        """Send one request body: attempts until one is acknowledged, each failure judged by
        :class:`~rocketspark.client.send_retries.SendRetries` (give up, or where and when to
        try again). An attempt that could move to another broker waits at most its share of
        what is left (``send_retries.attempt_timeout_ms``), so a hung broker (alive but silent) costs one
        share, not the whole timeout; the broker it timed out on is avoided by the next attempt
        and, with the latency table on, marked as the worst latency for later sends.

        A broker that is down is only avoided (and marked in the latency table when that is
        on): the route stays, as the route push and the 30 s refresh keep it current; only an
        answer saying the route is wrong (no such topic, no write permission) drops it.

        The retry state is made at the first failure: most sends succeed at once, and under
        load every step a send takes costs several times what it does alone."""
        started = time.monotonic()
        deadline = started + (timeout_ms or self.timeout_ms) / 1000
        attempts = 1 + max(0, self.retry_times_when_send_failed)
        retries: SendRetries | None = None
        while True:
            info = self.publish_info(topic)
            ref: Target | None = None
            try:
                ref = self._target(info, pin, None if retries is None else retries.avoid)
                left = attempts if retries is None else retries.attempts_left
                now = time.monotonic()
                wait_ms = attempt_timeout_ms(deadline, now, left, pin is not None, self.send_attempt_timeout_ms)
                response = self._attempt(info, topic, ref, body, batch, wait_ms, now)
            except RETRIABLE as exc:
                if retries is None:
                    retries = SendRetries(topic, self.routes, attempts, deadline, pin is not None, started=started)
                pause = retries.after(exc, info, ref)  # raises when the send must give up
                if pause:
                    time.sleep(pause)
                continue
            if info.template:
                self.routes.invalidate(topic)  # the topic exists now; learn its real route next time
            return send_result(topic, ref, response, own)

    def _attempt(
        self, info: PublishInfo, topic: str, ref: Target, body: bytes, batch: bool, wait_ms: int, started: float
    ) -> RemotingCommand:
        """One attempt, begun at ``started`` and waiting at most ``wait_ms``: send to ``ref``'s
        broker, wait for the answer, note its latency. An attempt on a replica group's master
        stops waiting as soon as the route names another master (a hung master is replaced
        while the attempt waits: the send moves on at once; the hung one, fenced by its lease,
        can acknowledge nothing when it wakes)."""
        address = self.broker_address(info.route, ref.broker_name)
        self.heartbeats.seen(address)
        request = send_request(info, topic, ref, body, batch=batch, queue_nums=self.default_topic_queue_nums)
        watch = None  # a replica group's master is watched: a send moves on once it is deposed
        if ref.broker_name in info.groups:
            watch = (MASTER_WATCH_S, partial(self._master_stays, topic, ref.broker_name, address))
        try:
            response = check(self.remoting.invoke(address, request, wait_ms, watch=watch))
        except RETRY_ON:
            self._record(ref.broker_name, started, failed=True)
            raise
        self._record(ref.broker_name, started, failed=False)
        return response

    def _master_stays(self, topic: str, group: str, master: str) -> None:
        """Watching a send's wait (every MASTER_WATCH_S): NotMasterError once the cached route
        moves the group's master away from ``master`` (a route push re-reads it); the send
        then goes again, to the new one."""
        route = self.routes.cached(topic)
        now = route.address_of(group) if route is not None else master
        if now != master:
            raise NotMasterError(
                f"broker group {group} has a new master ({now or 'none yet: an election is under way'}); "
                f"{master} had not answered a send of {topic}, which goes again"
            )

    def _record(self, broker_name: str, started: float, *, failed: bool) -> None:
        if self.fault is not None:
            self.fault.update(broker_name, (time.monotonic() - started) * 1000, failed=failed)

    def send(self, message: Message, *, timeout_ms: int | None = None, born_ms: int | None = None) -> SendResult:
        """Send one message and wait for the broker's acknowledgement. ``born_ms``: when it was
        made, if not now (a message relayed from another client keeps its born time)."""
        self._check(message)
        body, own = encode_sent(message.topic, [message], compression_kind=self.compression, born_ms=born_ms)
        return self._send_body(message.topic, body, pin_of(message), False, timeout_ms, own)

    def first_attempt(self, message: Message, *, born_ms: int | None = None) -> FirstAttempt | None:
        """The request ``send`` would make first, and the broker it would go to, without sending
        it and without any I/O: None when the topic's route is not cached (or the topic is new),
        and then the caller just sends. For a caller that delivers the request itself, faster
        than a send could (a broker's v2 endpoint, to its own broker, on its event loop); it
        reads the answer with ``result_of``, and sends normally when that raises."""
        if self.routes.cached(message.topic) is None:
            return None
        self._check(message)
        try:
            info = self.publish_info(message.topic)
            if info.template:
                return None
            ref = self._target(info, pin_of(message), None)
            address = self.broker_address(info.route, ref.broker_name)
        except RocketSparkError:
            return None  # e.g. a queue being remapped, a master being elected: a send (with its retries) sorts it out
        body, own = encode_sent(message.topic, [message], compression_kind=self.compression, born_ms=born_ms)
        request = send_request(info, message.topic, ref, body, batch=False, queue_nums=self.default_topic_queue_nums)
        return FirstAttempt(address, request, message.topic, ref, own)

    def result_of(self, attempt: FirstAttempt, response: RemotingCommand) -> SendResult:
        """The outcome of a first attempt delivered by the caller; raises for a refusal."""
        return send_result(attempt.topic, attempt.target, check(response), attempt.own_ids)

    def send_batch(self, messages: Sequence[Message], *, timeout_ms: int | None = None) -> list[SendResult]:
        """Send many messages in as few requests as the byte limit allows.

        Messages are grouped by topic (and by queue for keyed or pinned ones) in their original
        order, split into batches of at most ``batch_max_bytes``, and each batch is one record
        on one queue. Returns one SendResult per request; each covers ``count`` consecutive
        messages from ``queue_offset`` on, its ``msg_id`` the first one's client id and
        ``msg_ids()`` all of theirs (a batch's ids are consecutive: ``codec.ids``).
        """
        results: list[SendResult] = []
        for topic, pin, group, seen in self._groups(messages):
            plain = None if seen is None else seen.plain
            for chunk in chunk_messages(group, self.batch_max_bytes, seen):
                body, own = encode_sent(topic, chunk, compression_kind=self.compression, plain=plain)
                results.append(self._send_body(topic, body, pin, True, timeout_ms, own))
        return results

    def _groups(self, messages: Sequence[Message]) -> list[tuple[str, Pin | None, Sequence[Message], Survey | None]]:
        """The messages by topic and pin, each group in its original order, going to one queue
        (or round robin, unpinned); the common case, one group, with its ``survey``."""
        if not messages:
            return []
        seen = survey(messages)
        if seen.same_route:  # one topic, and one queue (or none) for all
            first = messages[0]
            self._check_all(first.topic, messages, seen.largest)
            return [(first.topic, pin_of(first), messages, seen)]
        groups: dict[tuple[str, Pin | None], list[Message]] = {}
        for message in messages:
            self._check(message)
            groups.setdefault((message.topic, pin_of(message)), []).append(message)
        return [(topic, pin, group, None) for (topic, pin), group in groups.items()]

    def send_to_queue(self, topic: str, queue_id: int, record: bytes, *, timeout_ms: int | None = None) -> SendResult:
        """Send one batch record, built with :mod:`rocketspark.codec.build`, to one queue.

        A record that names an idempotent producer (``Idempotence``: producer id, epoch, base
        sequence) is stored at most once: resending it (a replayed Spark micro-batch) appends
        nothing twice.
        """
        return self._send_body(topic, record, Pin(topic, queue_id), True, timeout_ms)

    def queue_count(self, topic: str) -> int:
        """How many queues keys and ``queue_id`` choose among (logical queues of a static topic)."""
        return len(self.publish_info(topic).stable)

    def send_async(self, message: Message, *, timeout_ms: int | None = None) -> concurrent.futures.Future[SendResult]:
        """Send without blocking; the future resolves to the SendResult or the error."""
        with self._executor_lock:
            if not self._accepting:
                raise ClientError("this producer is closed; send_async needs an open Producer (create a new one)")
            if self._executor is None:
                self._executor = self._make_pool()
            executor = self._executor
        return executor.submit(self.send, message, timeout_ms=timeout_ms)

    def send_oneway(self, message: Message) -> None:
        """Send without waiting for any answer: fastest, and a failure goes unnoticed."""
        self._check(message)
        info = self.publish_info(message.topic)
        ref = self._target(info, pin_of(message), None)
        body = encode_messages(message.topic, [message], compression_kind=self.compression)
        request = send_request(info, message.topic, ref, body, batch=False, queue_nums=self.default_topic_queue_nums)
        address = self.broker_address(info.route, ref.broker_name)
        self.heartbeats.seen(address)
        self.remoting.invoke_oneway(address, request)

    def close(self) -> None:
        """Wait for the sends already handed to ``send_async``, then close the connections."""
        with self._executor_lock:
            self._accepting = False
            executor = self._executor
        if executor is not None:
            executor.shutdown(wait=True)
        self.heartbeats.close()
        super().close()
