"""The group consumer: push-style consumption built on pull, with client-side rebalance.

As in RocketMQ (seed 001), every member heartbeats to the brokers of its topics; the brokers
answer with the group's members, and each member computes its own share of the queues with
the group's allocation strategy (``average``, ``average_by_circle``, ``consistent_hash``)
from the same sorted inputs, so each queue has exactly one member. A member rebalances every
``rebalance_interval_ms`` (20 s) and as soon as a heartbeat shows the membership changed: a
member that leaves unregisters at once; one that dies drops out after the brokers' heartbeat
timeout (``consumer_expired_ms``), and its queues are taken over then.

Each owned queue is pulled by its own thread (long polling), messages are handed to the
handler in order, and the progress is committed to the broker, so a queue that moves to
another member continues where this one stopped: at-least-once delivery.

Messages are filtered by ``tags`` (``"a || b"``) or by an SQL92 expression ``sql`` over their
properties (RocketMQ's ``MessageSelector.bySql``), on the brokers and again message by
message; a bad expression is refused by the constructor, with where it goes wrong.

A batch the handler fails on is sent back to the group's retry topic and the queue moves on;
the group consumes its retry topic too, and a message failing ``max_reconsume_times`` times
ends in the dead-letter queue (``rocketspark.client.retry``). Only when sending back fails
does the queue wait and hand the same batch over again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Unpack

from rocketspark.client.allocate import STRATEGIES
from rocketspark.client.consumer import Consumer
from rocketspark.client.producer import Producer
from rocketspark.client.pulling import parse_filter
from rocketspark.client.retry import MAX_RECONSUME_TIMES, RETRY_DELAYS_MS, RetryPolicy, as_first_sent, due_at_ms
from rocketspark.client.route_push import new_client_id
from rocketspark.errors import InvalidParameterError, RocketSparkError
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.group_topics import ORIGIN_MESSAGE_ID, RECONSUME_TIME, retry_topic
from rocketspark.protocol.static_mapping import MOCK_BROKER_NAME
from rocketspark.protocol.types import MessageExt, PullStatus
from rocketspark.protocol.validation import validate_topic_name
from rocketspark.security.client_side import SecurityKwargs

log = logging.getLogger(__name__)

Handler = Callable[[list[MessageExt]], None]
QueueKey = tuple[str, int]  # topic, logical queue id


def queue_name(topic: str, queue_id: int) -> str:
    """The queue as RocketMQ prints a MessageQueue (what consistent hashing hashes)."""
    return f"MessageQueue [topic={topic}, brokerName={MOCK_BROKER_NAME}, queueId={queue_id}]"


def share_of(strategy: str, client_id: str, members: list[str], topic: str, queue_count: int) -> list[int]:
    """The queues of ``topic`` that ``client_id`` owns among ``members`` (none while it knows
    no members). The strategies allocate the queues' names (what RocketMQ's MessageQueue
    prints, and what consistent hashing hashes), in id order, so that every member computes
    the same split as a RocketMQ client would."""
    if not members:
        return []
    queues = {queue_name(topic, q): q for q in range(queue_count)}
    chosen: list[str] = STRATEGIES[strategy](client_id, list(queues), members)
    return [queues[name] for name in chosen]


@dataclass
class Worker:
    """One owned queue's puller (``GroupConsumer.workers``): where it got to, what is
    committed, and the flag that tells its thread to stop."""

    key: QueueKey
    offset: int
    committed: int
    reset_version: int = -1  # the last admin offset reset applied (-1: none known); sent with commits
    reset_to: tuple[int, int] | None = None  # (reset id, offset) the worker moves to before its next pull
    stop: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None


class GroupConsumer:
    def __init__(
        self,
        nameserver: str | list[str] | None,
        group: str,
        topics: list[str] | str,
        handler: Handler,
        *,
        strategy: str = "average",
        rebalance_interval_ms: int = 20_000,
        heartbeat_interval_ms: int = 3_000,
        commit_interval_ms: int = 1_000,
        max_messages: int = 32,
        tags: str | None = None,
        sql: str | None = None,
        start_from: str = "latest",
        client_id: str | None = None,
        max_reconsume_times: int = MAX_RECONSUME_TIMES,
        retry_delays_ms: Sequence[int] = RETRY_DELAYS_MS,
        **security: Unpack[SecurityKwargs],
    ) -> None:
        if strategy not in STRATEGIES:
            raise InvalidParameterError(f"unknown allocation strategy {strategy!r}; use one of {sorted(STRATEGIES)}")
        if start_from not in ("earliest", "latest"):
            raise InvalidParameterError('start_from must be "earliest" or "latest"')
        self.group = group
        self.topics = [topics] if isinstance(topics, str) else list(topics)
        self.handler = handler
        self.strategy = strategy
        self.rebalance_interval_s = rebalance_interval_ms / 1000
        self.heartbeat_interval_s = heartbeat_interval_ms / 1000
        self.commit_interval_s = commit_interval_ms / 1000
        self.max_messages = max_messages
        parse_filter(tags, sql)  # a bad SQL92 expression is refused here, with where it goes wrong
        self.tags, self.sql = tags, sql
        self.start_from = start_from
        self.client_id = client_id or new_client_id()
        self.retry = RetryPolicy(max_reconsume_times, tuple(retry_delays_ms))
        self.retry_topic = retry_topic(group)
        self.consumer = Consumer(nameserver, **security)
        self._nameserver, self._security = nameserver, security
        self._producer: Producer | None = None  # sends failed messages back; made on first need
        self.members: list[str] = []
        self.workers: dict[QueueKey, Worker] = {}
        self._waiting: set[QueueKey] = set()  # this member's queues whose lock another member still holds
        self._resets_seen: dict[str, int] | None = None  # topic -> id of the last offset reset (None: not known yet)
        self._reset_lock = threading.Lock()  # Worker.reset_to, set by the heartbeat, taken by the worker
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> GroupConsumer:
        self._heartbeat()
        self._rebalance()
        self._thread = threading.Thread(target=self._loop, name=f"group-{self.group}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop pulling, commit where each queue got to, and leave the group at once."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
        with self._lock:
            self._release(list(self.workers))
        self._each_broker(RequestCode.UNREGISTER_CLIENT, {"consumerGroup": self.group, "clientId": self.client_id})
        self.consumer.close()
        if self._producer is not None:
            self._producer.close()

    def __enter__(self) -> GroupConsumer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def assignment(self) -> set[QueueKey]:
        """The queues of the topics given that this member owns (``workers`` also has the
        group's retry-topic queues it owns)."""
        return {key for key in self.workers if key[0] != self.retry_topic}

    # -- membership ----------------------------------------------------------------------------

    def _brokers(self) -> dict[str, str]:
        brokers: dict[str, str] = {}
        for topic in self.topics:
            try:
                route = self.consumer.routes.get(topic)
            except RocketSparkError as exc:
                log.warning("group %s: no route for %s: %s", self.group, topic, exc)
                continue
            brokers.update({b.broker_name: b.address for b in route.brokers})
        return brokers

    def _each_broker(
        self, code: int, ext: dict[str, Any], brokers: dict[str, str] | None = None
    ) -> list[RemotingCommand]:
        answers = []
        for name, address in sorted((self._brokers() if brokers is None else brokers).items()):
            try:
                answers.append(self.consumer.call(address, RemotingCommand.request(code, ext), 2000))
            except RocketSparkError as exc:
                log.debug("group %s: broker %s did not answer %s: %s", self.group, name, code, exc)
        return answers

    def _heartbeat(self) -> bool:
        """Heartbeat every broker; True when the membership changed."""
        ext: dict[str, object] = {"consumerGroup": self.group, "clientId": self.client_id, "topics": self.topics}
        if self._resets_seen:  # so that a broker that restarted knows what a new reset must exceed
            ext["resetsSeen"] = {t: v for t, v in self._resets_seen.items() if v > 0}
        brokers = self._brokers()
        answers = self._each_broker(RequestCode.HEART_BEAT, ext, brokers)
        self._follow_resets(answers, complete=bool(brokers) and len(answers) == len(brokers))
        seen = [sorted(a.ext.get("members", [])) for a in answers if a.ext.get("members")]
        if not seen:
            return False
        members = max(seen, key=len)  # a broker that just restarted may not know everyone yet
        if self.client_id not in members:
            members = sorted([*members, self.client_id])
        changed = members != self.members
        self.members = members
        return changed

    def _follow_resets(self, answers: list[RemotingCommand], *, complete: bool) -> None:
        """Move owned queues to an admin's offset reset the brokers tell of (``admin
        reset-offset``), each reset once. Resets made before this member knew of them are in the
        committed offsets it started from: the first heartbeat every broker answered only
        learns their ids. A worker commits with the id of the last reset it applied, and the
        broker drops a commit that predates a later reset."""
        latest: dict[str, tuple[int, dict[str, int]]] = {}
        for answer in answers:
            for topic, (version, offsets) in (answer.ext.get("resets") or {}).items():
                if topic in self.topics and int(version) > latest.get(topic, (-1, {}))[0]:
                    latest[topic] = (int(version), offsets)
        if self._resets_seen is None:
            if complete:
                self._resets_seen = {topic: version for topic, (version, _) in latest.items()}
            return
        seen = self._resets_seen
        with self._lock, self._reset_lock:
            for topic, (version, offsets) in latest.items():
                if version <= seen.get(topic, 0):
                    continue
                seen[topic] = version
                log.info("group %s: offsets of %s reset by an admin; moving there", self.group, topic)
                for (t, queue_id), worker in self.workers.items():
                    if t == topic and str(queue_id) in offsets:
                        worker.reset_to = (version, int(offsets[str(queue_id)]))

    def _apply_reset(self, worker: Worker) -> None:
        """Continue from the reset offset and commit it (over anything committed since)."""
        with self._reset_lock:
            pending, worker.reset_to = worker.reset_to, None
        if pending is not None:
            worker.reset_version, worker.offset, worker.committed = pending[0], pending[1], -1
            self._commit(worker)

    def _loop(self) -> None:
        next_rebalance = time.monotonic() + self.rebalance_interval_s
        while not self._stop.wait(self.heartbeat_interval_s):
            try:
                changed = self._heartbeat()
                if changed or self._waiting or time.monotonic() >= next_rebalance:
                    self._rebalance()
                    next_rebalance = time.monotonic() + self.rebalance_interval_s
            except Exception:
                log.exception("group %s: heartbeat or rebalance failed; retrying", self.group)

    # -- rebalance -----------------------------------------------------------------------------

    def _share(self, topic: str) -> list[int]:
        """This member's queues of ``topic``."""
        if not self.members:
            return []  # without asking for the topic's queues
        return share_of(self.strategy, self.client_id, self.members, topic, len(self.consumer.queues(topic)))

    def _subscribed(self) -> list[str]:
        """The topics given, and the group's retry topic (its brokers create it at the first
        heartbeat; a group named outside the topic alphabet has none)."""
        try:
            validate_topic_name(self.retry_topic)
        except RocketSparkError:
            return self.topics
        return [*self.topics, self.retry_topic]

    def _rebalance(self) -> None:
        with self._lock:
            wanted: set[QueueKey] = set()
            for topic in self._subscribed():
                try:
                    wanted |= {(topic, q) for q in self._share(topic)}
                except RocketSparkError as exc:
                    log.warning("group %s: cannot rebalance %s: %s", self.group, topic, exc)
                    wanted |= {k for k in self.workers if k[0] == topic}  # keep what we have
            self._release(sorted(set(self.workers) - wanted))
            self._drop_lost(sorted(set(self.workers) & wanted))
            for key in sorted(wanted - set(self.workers)):
                self._acquire(key)
            self._waiting = wanted - set(self.workers)

    def _drop_lost(self, keys: list[QueueKey]) -> None:
        """Stop pulling the queues whose lock another member holds now (this one was taken for
        dead: a pause longer than the brokers' consumer_expired_ms), without committing: the
        new owner's progress is not to be moved back. Asking again renews a lock still held."""
        for key in keys:
            try:
                holder = self.consumer.lock_queue(self.group, self.client_id, *key)
            except RocketSparkError:
                continue  # the broker is unreachable: keep the queue, ask at the next round
            if holder != self.client_id:
                log.warning("group %s: %s/%s is held by %s now; stopped pulling it", self.group, *key, holder)
                worker = self.workers.pop(key)
                worker.stop.set()

    def _start_offset(self, key: QueueKey) -> int:
        committed = self.consumer.committed_offset(self.group, *key)
        if committed is not None:
            return committed
        if self.start_from == "earliest" or key[0] == self.retry_topic:  # nothing sent back is skipped
            return self.consumer.min_offset(*key)
        return self.consumer.max_offset(*key)

    def _acquire(self, key: QueueKey) -> None:
        """Take a queue over: its lock first (the member giving it up releases the lock only
        after committing), then its committed offset, so the handover repeats nothing."""
        try:
            holder = self.consumer.lock_queue(self.group, self.client_id, *key)
            if holder != self.client_id:
                log.debug("group %s: %s/%s is still held by %s; next heartbeat", self.group, *key, holder)
                return
            offset = self._start_offset(key)
        except RocketSparkError as exc:
            log.warning("group %s: cannot start %s/%s yet: %s", self.group, *key, exc)
            return
        known = -1 if self._resets_seen is None else self._resets_seen.get(key[0], 0)
        worker = Worker(key, offset, offset, reset_version=known if key[0] in self.topics else -1)
        worker.thread = threading.Thread(
            target=self._pull_loop, args=(worker,), name=f"pull-{key[0]}-{key[1]}", daemon=True
        )
        self.workers[key] = worker
        worker.thread.start()

    def _release(self, keys: list[QueueKey]) -> None:
        """Stop the queues' workers and commit where each got to. Every worker is told to stop
        before any is waited for, so releasing many costs one long poll, not one each."""
        workers = [w for w in (self.workers.pop(key, None) for key in keys) if w is not None]
        for worker in workers:
            worker.stop.set()
        for worker in workers:
            if worker.thread is not None:
                worker.thread.join(10)
            self._apply_reset(worker)
            self._commit(worker)
            try:
                self.consumer.unlock_queue(self.group, self.client_id, *worker.key)
            except RocketSparkError as exc:  # it lapses when this member leaves the group
                log.warning("group %s: unlocking %s/%s failed: %s", self.group, *worker.key, exc)

    def _commit(self, worker: Worker) -> None:
        if worker.offset == worker.committed:
            return
        try:
            version = worker.reset_version if worker.reset_version >= 0 else None
            self.consumer.commit_offset(self.group, *worker.key, worker.offset, reset_version=version)
            worker.committed = worker.offset
        except RocketSparkError as exc:
            log.warning("group %s: commit of %s/%s failed: %s", self.group, *worker.key, exc)

    def _pull_loop(self, worker: Worker) -> None:
        topic, queue_id = worker.key
        last_commit = time.monotonic()
        backoff = 0.05
        while not worker.stop.is_set() and not self._stop.is_set():
            self._apply_reset(worker)
            try:
                result = self.consumer.pull(
                    topic, queue_id, worker.offset, self.max_messages, tags=self.tags, sql=self.sql, long_poll_ms=500
                )
            except Exception as exc:  # a thread that ended here would leave its queue unread
                if isinstance(exc, RocketSparkError):
                    log.debug("group %s: pull %s/%s failed: %s", self.group, topic, queue_id, exc)
                else:
                    log.exception("group %s: pull %s/%s failed; retrying", self.group, topic, queue_id)
                worker.stop.wait(backoff)
                backoff = min(backoff * 2, 2.0)
                continue
            if worker.reset_to is not None:
                continue  # read from where the group was before the reset: dropped
            next_offset = result.next_offset
            if result.messages:
                batch = result.messages
                if topic == self.retry_topic:
                    batch = self._due(worker, batch)
                    if not batch:
                        continue  # the first is not due yet: pull again (at most a second later)
                    if len(batch) < len(result.messages):
                        next_offset = batch[-1].queue_offset + 1
                if not self._consume(worker, batch):
                    # Sending back failed too. At-least-once: the offset stays, so the same
                    # messages are handed over again after the backoff.
                    worker.stop.wait(backoff)
                    backoff = min(backoff * 2, 2.0)
                    continue
            backoff = 0.05
            if result.status is not PullStatus.NO_NEW_MSG or next_offset != worker.offset:
                worker.offset = next_offset
            if time.monotonic() - last_commit >= self.commit_interval_s:
                self._commit(worker)
                last_commit = time.monotonic()

    # -- failed messages ------------------------------------------------------------------------

    def _due(self, worker: Worker, batch: list[MessageExt]) -> list[MessageExt]:
        """The messages of a retry-topic batch that are due, from its head; none (after a
        wait of at most a second) while its first is not."""
        now = int(time.time() * 1000)
        wait_ms = due_at_ms(batch[0]) - now
        if wait_ms > 0:
            worker.stop.wait(min(wait_ms, 1000) / 1000)
            return []
        due = 0
        while due < len(batch) and due_at_ms(batch[due]) <= now:
            due += 1
        return batch[:due]

    def _consume(self, worker: Worker, batch: list[MessageExt]) -> bool:
        """Hand ``batch`` over. When the handler fails on a batch of several, each message is
        handed over alone, so that only the ones it fails on are sent back (retry topic, or
        the dead-letter queue): a poison message takes no healthy batch-mate to the
        dead-letter queue. False when sending back failed: the batch is handed over again."""
        retried = worker.key[0] == self.retry_topic
        shown = [as_first_sent(m) for m in batch] if retried else batch
        try:
            self.handler(shown)
            return True
        except Exception:
            log.exception(
                "group %s: the handler failed on %d messages of %s/%s at offset %d",
                self.group,
                len(batch),
                *worker.key,
                worker.offset,
            )
        failed = (
            batch if len(batch) == 1 else [m for m, one in zip(batch, shown, strict=True) if not self._handles(one)]
        )
        try:
            for message in failed:
                back = self.retry.send_back(self.group, message)
                self._producer_for_retries().send(back)
                if back.topic != self.retry_topic:
                    log.warning(
                        "group %s: message %s failed %s times; moved to the dead-letter queue %s",
                        self.group,
                        back.properties.get(ORIGIN_MESSAGE_ID),
                        back.properties.get(RECONSUME_TIME),
                        back.topic,
                    )
            return True
        except RocketSparkError as exc:
            log.warning("group %s: sending failed messages back failed (%s); handing them over again", self.group, exc)
            return False

    def _handles(self, message: MessageExt) -> bool:
        try:
            self.handler([message])
            return True
        except Exception:
            log.warning("group %s: the handler failed on message %s; sending it back", self.group, message.msg_id)
            return False

    def _producer_for_retries(self) -> Producer:
        if self._producer is None:
            self._producer = Producer(self._nameserver, **self._security)
        return self._producer
