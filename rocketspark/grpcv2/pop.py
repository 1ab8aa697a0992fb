"""Pop consumption for the official clients: the endpoint reads a group's queues, hands
messages out, takes acknowledgements and keeps the group's watermark on the broker.

The state of each (group, topic) is a :class:`~rocketspark.grpcv2.popstate.PopQueue` per
logical queue, changed only on the endpoint's event loop; reads and commits go to the cluster
through our own ``Consumer`` from worker threads. The watermark is committed as the group's
offset (so ``rocketspark admin progress`` shows a pop group's lag as any group's) once a
second when it moved, and when the endpoint stops. A message that had its last attempt goes to
``%DLQ%<group>`` (:mod:`rocketspark.grpcv2.deadletter`).

An endpoint serves only the queues of a group whose lock it holds
(:mod:`rocketspark.grpcv2.ownership`), so two endpoints never hand out one message at once; it
lets a group go when its consumers have been quiet for ``IDLE_RELEASE_S``.

Each delivery remembers the client it went to. When that client is gone (it said so, or its
Telemetry stream ended and it did not come back: :mod:`rocketspark.grpcv2.presence`), what it
held is made visible at once for the group's other consumers here, rather than at the end of its
invisible time (up to a minute for a PushConsumer, whose deliveries are renewed while it lives).

Priority messages (RocketMQ 5.4, RIP-80) sit in the queue of their priority; once a group's
topic has had one, a receive takes from its highest queue down (RocketMQ's default pop order),
not in turn; within a queue, higher priority first (``popstate``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from rocketspark.errors import RocketSparkError, SystemBusyError
from rocketspark.grpcv2.clients import Clients, in_thread
from rocketspark.grpcv2.deadletter import DeadLetters
from rocketspark.grpcv2.limits import PopLimits
from rocketspark.grpcv2.ownership import Ownership
from rocketspark.grpcv2.popstate import GroupTopic, Inflight, PopQueue, Receipt
from rocketspark.grpcv2.presence import Presence
from rocketspark.grpcv2.stubs import definition_pb2 as pb
from rocketspark.grpcv2.translate import Refused
from rocketspark.protocol.trace import Tracer
from rocketspark.protocol.types import MessageExt, PullStatus

log = logging.getLogger(__name__)

READ_AHEAD = 64  # messages read per queue beyond what was asked: the next receive finds them
POLL_S = 0.2  # how often the queues of a group's topic are read while nothing comes
COMMIT_INTERVAL_S = 1.0
KEEP_S = 5.0  # how often an endpoint renews its membership and locks, and auto-renewed deliveries
RENEW_AHEAD_S = 15.0  # an auto-renewed delivery this close to visible is made invisible again
MAX_RENEW_S = 3 * 3600.0  # and not for longer than this (RocketMQ's proxy: renewMaxTimeMillis)
DEPARTED_EVERY_S = 0.25  # how often gone clients are looked for
MAX_INFLIGHT = 10_000  # messages of one queue handed out and not acknowledged, at most (memory)
IDLE_RELEASE_S = 60.0  # a group nobody received from this long (and nothing in flight) is let go


class Pop:
    def __init__(
        self, clients: Clients, limits: PopLimits, client_id: Callable[[], str], presence: Presence, trace: Tracer
    ) -> None:
        self.clients = clients
        self.limits = limits
        self.trace = trace  # deliveries, acks, nacks and dead letters, for message trace
        self.dead_letters = DeadLetters(clients, limits.max_attempts, trace)
        self.ownership = Ownership(clients, client_id)
        self.presence = presence  # which consumers are still there
        self.states: dict[tuple[str, str], GroupTopic] = {}
        self._opening: dict[tuple[str, str], asyncio.Future[GroupTopic]] = {}

    # -- the requests ------------------------------------------------------------------------

    def heard_from(self, client_id: str) -> None:
        self.presence.heard_from(client_id, time.monotonic())

    async def receive(
        self,
        group: str,
        topic: str,
        first_queue: int,
        wanted: int,
        invisible_s: float,
        wait_s: float,
        tags: str | None,
        sql: str | None = None,
        *,
        consumer: str = "",
        renew: bool = False,
    ) -> list[tuple[Inflight, str]]:
        """Up to ``wanted`` messages, waiting up to ``wait_s`` for one: each with its topic;
        only those with one of ``tags``, or those the SQL92 expression ``sql`` selects.
        ``consumer``: the client id they go to (visible again once it is gone); ``renew``: it
        asked for auto renewal (a PushConsumer): they stay invisible while it lives, up to
        ``MAX_RENEW_S``."""
        state = await self._state(group, topic)
        state.used_at = time.monotonic()
        deadline = time.monotonic() + wait_s
        while True:
            if self.presence.ended(consumer):  # it said it terminates while this receive waited
                return []
            await self.dead_letters.drain(state)
            taken = self._take(state, first_queue, wanted, invisible_s)
            if taken:
                traced = self.trace.traced_topic(topic)
                for f in taken:
                    f.consumer, f.renew, f.renew_until = consumer, renew, time.monotonic() + MAX_RENEW_S
                    if traced:
                        self.trace.noted("delivered", f.message, group, consumer, f"by v2 pop, attempt {f.attempt}")
                return [(f, topic) for f in taken]
            if time.monotonic() >= state.idle_until:  # read again at most every POLL_S when nothing came
                if await self._fill(state, tags, sql):
                    continue
                state.idle_until = time.monotonic() + POLL_S
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return []
            state.changed.clear()
            try:
                await asyncio.wait_for(state.changed.wait(), min(POLL_S / 2, remaining))
            except TimeoutError:
                pass

    def ack(self, group: str, topic: str, handle: str) -> None:
        state, receipt = self._named(group, topic, handle)
        inflight = state.queues[receipt.queue_id].find(receipt)
        if not state.queues[receipt.queue_id].ack(receipt):
            raise _stale(handle)
        state.changed.set()
        if inflight is not None and self.trace.traced_topic(topic):
            self.trace.noted("acked", inflight.message, group, inflight.consumer, f"attempt {inflight.attempt}")

    def change_invisible(self, group: str, topic: str, handle: str, invisible_s: float) -> Inflight:
        state, receipt = self._named(group, topic, handle)
        changed = state.queues[receipt.queue_id].change_invisible(receipt, time.monotonic(), invisible_s)
        if changed is None:
            raise _stale(handle)
        state.changed.set()
        if self.trace.traced_topic(topic):  # a PushConsumer's nack, or a SimpleConsumer's longer lease
            detail = f"attempt {changed.attempt}: invisible for {invisible_s:g} s more"
            self.trace.noted("nacked", changed.message, group, changed.consumer, detail)
        return changed

    async def forward_to_dlq(self, group: str, topic: str, handle: str) -> None:
        """The client gives up on a message (a FIFO consumer out of attempts): dead-letter it."""
        state, receipt = self._named(group, topic, handle)
        queue = state.queues[receipt.queue_id]
        inflight = queue.find(receipt)
        if inflight is None or inflight.dead:
            raise _stale(handle)
        inflight.dead = True
        if not await asyncio.shield(asyncio.ensure_future(self.dead_letters.send(state, queue, inflight))):
            raise SystemBusyError("the dead-letter queue did not take the message; it stays in flight, try again")

    def assignment(self, group: str, topic: str) -> None:
        """QueryAssignment: nothing to prepare, the state is made on the first receive."""

    # -- state -------------------------------------------------------------------------------

    def _named(self, group: str, topic: str, handle: str) -> tuple[GroupTopic, Receipt]:
        receipt = Receipt.decode(handle)
        if receipt is None:
            raise Refused(pb.Code.INVALID_RECEIPT_HANDLE, f"receipt handle {handle!r} is not one this endpoint gave")
        state = self.states.get((group, topic))
        if state is None or receipt.queue_id not in state.queues:
            raise _stale(handle)
        return state, receipt

    async def _state(self, group: str, topic: str) -> GroupTopic:
        key = (group, topic)
        if key in self.states:
            return self.states[key]
        opening = self._opening.get(key)
        if opening is None:  # one opening per group and topic, however many receives ask at once
            opening = asyncio.ensure_future(in_thread(self._open, group, topic))
            self._opening[key] = opening
        try:
            state = await asyncio.shield(opening)
        finally:
            if opening.done():
                self._opening.pop(key, None)
        self.states.setdefault(key, state)
        return self.states[key]

    def _open(self, group: str, topic: str) -> GroupTopic:
        """The group's queues of ``topic``, each from its committed watermark; a group that
        never consumed starts at the first message still stored."""
        consumer = self.clients.consumer
        queues: dict[int, PopQueue] = {}
        for queue in consumer.queues(topic):
            queues[queue.queue_id] = self._queue_at_committed(group, topic, queue.queue_id)
        owned, _ = self.ownership.claim(group, topic, sorted(queues))  # the brokers make its DLQ as it joins
        log.info(
            "grpc v2 endpoint: group %s consumes %s by pop; this endpoint serves %d of its %d queues",
            group,
            topic,
            len(owned),
            len(queues),
        )
        return GroupTopic(group, topic, queues, owned=owned)

    def _queue_at_committed(self, group: str, topic: str, queue_id: int) -> PopQueue:
        consumer = self.clients.consumer
        committed = consumer.committed_offset(group, topic, queue_id)
        start = committed if committed is not None else consumer.min_offset(topic, queue_id)
        return PopQueue(queue_id, start, start if committed is not None else -1)

    def _take(self, state: GroupTopic, first_queue: int, wanted: int, invisible_s: float) -> list[Inflight]:
        """From the queue the client named on, in turn; with priority messages, highest first."""
        ids = sorted(state.owned)
        if any(state.queues[q].prioritized for q in ids):
            order = ids[::-1]
        else:
            start = ids.index(first_queue) if first_queue in state.owned else 0
            order = ids[start:] + ids[:start]
        taken: list[Inflight] = []
        now = time.monotonic()
        for queue_id in order:
            queue = state.queues[queue_id]
            taken += queue.take(wanted - len(taken), now, invisible_s, self.limits.max_attempts, MAX_INFLIGHT)
            if len(taken) >= wanted:
                break
        return taken

    async def _fill(self, state: GroupTopic, tags: str | None, sql: str | None) -> bool:
        """Read ahead on every queue with little pending; whether anything new came."""
        async with state.filling:
            short = [
                q
                for q in state.queues.values()
                if q.queue_id in state.owned
                and len(q.pending) < READ_AHEAD // 2
                and len(q.pending) + len(q.inflight) < MAX_INFLIGHT
            ]
            if not short:
                return False
            at = [(q.queue_id, q.next_offset) for q in short]
            read = await in_thread(self._read, state.topic, at, tags, sql)
        grew = False
        for queue in short:
            if state.queues.get(queue.queue_id) is not queue or queue.queue_id not in state.owned:
                continue  # given up or taken back while it was read: that read is stale
            messages, next_offset = read[queue.queue_id]
            before = len(queue.pending)
            queue.add(messages, next_offset)
            grew = grew or len(queue.pending) > before
        return grew

    def _read(
        self, topic: str, queues: list[tuple[int, int]], tags: str | None, sql: str | None
    ) -> dict[int, tuple[list[MessageExt], int]]:
        consumer = self.clients.consumer
        read: dict[int, tuple[list[MessageExt], int]] = {}
        for queue_id, offset in queues:
            result = consumer.pull(topic, queue_id, offset, READ_AHEAD, tags=tags, sql=sql)
            if result.status is PullStatus.OFFSET_ILLEGAL and result.next_offset > offset:
                log.warning(
                    "grpc v2 endpoint: %s queue %d offsets %d..%d are gone (retention); going on at %d",
                    topic,
                    queue_id,
                    offset,
                    result.next_offset,
                    result.next_offset,
                )
            read[queue_id] = (list(result.messages), max(offset, result.next_offset))
        return read

    # -- the dead-letter queue and the watermark ---------------------------------------------

    async def commit_forever(self) -> None:
        while True:
            await asyncio.sleep(COMMIT_INTERVAL_S)
            try:
                await self.commit()
            except Exception:  # the loop outlives a bad round
                log.exception("grpc v2 endpoint: committing pop watermarks failed")

    async def commit(self) -> None:
        """Store every queue's watermark that moved since it was last stored."""
        marks = [
            (state, queue, queue.watermark())
            for state in list(self.states.values())
            for queue in state.queues.values()
            if queue.queue_id in state.owned
        ]
        moved = [(state, queue, mark) for state, queue, mark in marks if mark != queue.committed]
        if not moved:
            return
        try:
            await in_thread(self._commit, [(s.group, s.topic, q.queue_id, w) for s, q, w in moved])
        except RocketSparkError as exc:
            log.warning("grpc v2 endpoint: committing pop watermarks failed (%s); trying again", exc)
            return
        for _, queue, mark in moved:
            queue.committed = mark

    async def keep_forever(self) -> None:
        while True:
            await asyncio.sleep(KEEP_S)
            for state in list(self.states.values()):
                try:
                    await self.keep(state)
                except Exception as exc:  # the loop outlives a bad round
                    log.warning("grpc v2 endpoint: renewing group %s's locks failed (%s)", state.group, exc)

    async def keep(self, state: GroupTopic) -> None:
        """Renew the group's membership and locks; let a quiet group go."""
        idle = time.monotonic() - state.used_at > IDLE_RELEASE_S
        if idle and not any(q.inflight for q in state.queues.values()):
            await self.commit()
            self.states.pop((state.group, state.topic), None)
            await in_thread(self.ownership.release, state.group, state.topic, sorted(state.owned))
            log.info(
                "grpc v2 endpoint: group %s let go of %s (no receive for %.0f s)",
                state.group,
                state.topic,
                IDLE_RELEASE_S,
            )
            return
        self.renew_deliveries(state)
        held, unknown = await in_thread(self.ownership.claim, state.group, state.topic, sorted(state.queues))
        lost = state.owned - held - unknown  # another endpoint has it now: what was in flight here is its
        gained = {
            queue_id: await in_thread(self._queue_at_committed, state.group, state.topic, queue_id)
            for queue_id in held - state.owned  # taken (back): from where the group got to
        }
        for queue_id in lost:  # from here on no await: the swap is seen whole
            log.warning(
                "grpc v2 endpoint: group %s lost %s queue %d to another endpoint", state.group, state.topic, queue_id
            )
            state.queues[queue_id] = PopQueue(queue_id, 0, 0)
        state.queues.update(gained)
        state.owned = (state.owned - lost) | set(gained)
        state.changed.set()

    def renew_deliveries(self, state: GroupTopic) -> None:
        """Keep auto-renewed deliveries invisible while their consumer lives."""
        now = time.monotonic()
        extend = self.limits.default_invisible_ms / 1000
        alive: dict[str, bool] = {}
        for queue in state.queues.values():
            for f in queue.inflight.values():
                if not f.renew or f.dead or f.visible_at - now >= RENEW_AHEAD_S or now >= f.renew_until:
                    continue
                if alive.setdefault(f.consumer, self.presence.alive(f.consumer, now)):
                    f.visible_at = now + extend

    async def release_departed_forever(self) -> None:
        """Release what gone clients held, a moment after they went."""
        while True:
            await asyncio.sleep(DEPARTED_EVERY_S)
            for client in self.presence.departed(time.monotonic()):
                self.release(client, "its Telemetry stream ended and it did not come back")

    def release(self, client: str, why: str, group: str | None = None) -> int:
        """Make every message ``client`` holds here (of ``group``, if named) visible now, for
        the group's other consumers (the next receive gets it, its delivery attempt raised).
        How many."""
        if not client:
            return 0
        now, total = time.monotonic(), 0
        for state in list(self.states.values()):
            if group is not None and state.group != group:
                continue
            released = sum(queue.release(client, now) for queue in state.queues.values())
            if released:
                state.changed.set()
                log.info(
                    "grpc v2 endpoint: client %s is gone (%s); its %d unacknowledged messages of %s in group %s "
                    "are visible again",
                    client,
                    why,
                    released,
                    state.topic,
                    state.group,
                )
            total += released
        return total

    async def release_all(self) -> None:
        """At the endpoint's stop: store the watermarks, let every group go."""
        await self.commit()
        for state in list(self.states.values()):
            try:
                await in_thread(self.ownership.release, state.group, state.topic, sorted(state.owned))
            except RocketSparkError as exc:
                log.debug("grpc v2 endpoint: releasing group %s failed: %s", state.group, exc)
        self.states.clear()

    def _commit(self, marks: list[tuple[str, str, int, int]]) -> None:
        consumer = self.clients.consumer
        for group, topic, queue_id, offset in marks:
            consumer.commit_offset(group, topic, queue_id, offset)


def _stale(handle: str) -> Refused:
    return Refused(
        pb.Code.INVALID_RECEIPT_HANDLE,
        f"receipt handle {handle!r} names no delivery in flight: the message was acknowledged, its "
        "invisibility ended and it was delivered again (use the newest receipt), or the endpoint restarted "
        "(it will be delivered again)",
    )
