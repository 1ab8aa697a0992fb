"""A group member's queues: its share of them, and the handover that keeps one owner a queue.

Every member computes its own share from the same sorted inputs (the members the brokers
report, the topics' queue counts) with the group's allocation strategy, so each queue has
exactly one member (see :mod:`rocketspark.client.allocate`). A queue changes hands through its
lock on the broker: the member giving it up commits where it got to and only then unlocks;
the one taking it over locks it first and then reads the committed offset, so the handover
repeats nothing. A member whose lock another holds now (it was taken for dead) stops pulling
that queue without committing. An admin's offset reset moves the owned queues it names.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from rocketspark.client.allocate import STRATEGIES
from rocketspark.errors import RocketSparkError
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.static_mapping import MOCK_BROKER_NAME
from rocketspark.protocol.validation import validate_topic_name

log = logging.getLogger(__name__)

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
    """One owned queue's puller (``OwnedQueues.workers``): where it got to, what is
    committed, and the flag that tells its thread to stop."""

    key: QueueKey
    offset: int
    committed: int
    reset_version: int = -1  # the last admin offset reset applied (-1: none known); sent with commits
    reset_to: tuple[int, int] | None = None  # (reset id, offset) the worker moves to before its next pull
    stop: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None


class QueueOffsets(Protocol):
    """What the handover asks the brokers: queue counts, locks, offsets (a ``Consumer``)."""

    def queues(self, topic: str) -> Sequence[object]: ...

    def lock_queue(self, group: str, client_id: str, topic: str, queue_id: int) -> str: ...

    def unlock_queue(self, group: str, client_id: str, topic: str, queue_id: int) -> None: ...

    def committed_offset(self, group: str, topic: str, queue_id: int) -> int | None: ...

    def min_offset(self, topic: str, queue_id: int) -> int: ...

    def max_offset(self, topic: str, queue_id: int) -> int: ...

    def commit_offset(
        self, group: str, topic: str, queue_id: int, offset: int, *, reset_version: int | None = None
    ) -> None: ...


@dataclass(frozen=True, slots=True)
class Member:
    """Who this member is and what it consumes: what the share is computed from."""

    group: str
    client_id: str
    topics: list[str]  # the topics given
    retry_topic: str  # the group's retry topic, consumed too
    strategy: str
    start_from: str  # "earliest" or "latest": where a queue with no committed offset starts


class OwnedQueues:
    """The queues this member owns, each pulled by a worker thread running ``pull``."""

    def __init__(self, consumer: QueueOffsets, member: Member, pull: Callable[[Worker], None]) -> None:
        self.consumer = consumer
        self.member = member
        self.pull = pull
        self.workers: dict[QueueKey, Worker] = {}
        self.waiting: set[QueueKey] = set()  # this member's queues whose lock another member still holds
        self.resets_seen: dict[str, int] | None = None  # topic -> id of the last offset reset (None: not known yet)
        self.lock = threading.Lock()
        self._reset_lock = threading.Lock()  # Worker.reset_to, set by the heartbeat, taken by the worker

    # -- rebalance -----------------------------------------------------------------------------

    def _share(self, topic: str, members: list[str]) -> list[int]:
        """This member's queues of ``topic``."""
        if not members:
            return []  # without asking for the topic's queues
        m = self.member
        return share_of(m.strategy, m.client_id, members, topic, len(self.consumer.queues(topic)))

    def _subscribed(self) -> list[str]:
        """The topics given, and the group's retry topic (its brokers create it at the first
        heartbeat; a group named outside the topic alphabet has none)."""
        try:
            validate_topic_name(self.member.retry_topic)
        except RocketSparkError:
            return self.member.topics
        return [*self.member.topics, self.member.retry_topic]

    def rebalance(self, members: list[str]) -> None:
        """Own this member's share among ``members``: give up the rest, take over what is new."""
        with self.lock:
            wanted: set[QueueKey] = set()
            for topic in self._subscribed():
                try:
                    wanted |= {(topic, q) for q in self._share(topic, members)}
                except RocketSparkError as exc:
                    log.warning("group %s: cannot rebalance %s: %s", self.member.group, topic, exc)
                    wanted |= {k for k in self.workers if k[0] == topic}  # keep what we have
            self._release(sorted(set(self.workers) - wanted))
            self._drop_lost(sorted(set(self.workers) & wanted))
            for key in sorted(wanted - set(self.workers)):
                self._acquire(key)
            self.waiting = wanted - set(self.workers)

    def _drop_lost(self, keys: list[QueueKey]) -> None:
        """Stop pulling the queues whose lock another member holds now (this one was taken for
        dead: a pause longer than the brokers' consumer_expired_ms), without committing: the
        new owner's progress is not to be moved back. Asking again renews a lock still held."""
        group, client_id = self.member.group, self.member.client_id
        for key in keys:
            try:
                holder = self.consumer.lock_queue(group, client_id, *key)
            except RocketSparkError:
                continue  # the broker is unreachable: keep the queue, ask at the next round
            if holder != client_id:
                log.warning("group %s: %s/%s is held by %s now; stopped pulling it", group, *key, holder)
                worker = self.workers.pop(key)
                worker.stop.set()

    def _start_offset(self, key: QueueKey) -> int:
        committed = self.consumer.committed_offset(self.member.group, *key)
        if committed is not None:
            return committed
        if self.member.start_from == "earliest" or key[0] == self.member.retry_topic:  # nothing sent back is skipped
            return self.consumer.min_offset(*key)
        return self.consumer.max_offset(*key)

    def _acquire(self, key: QueueKey) -> None:
        """Take a queue over: its lock first (the member giving it up releases the lock only
        after committing), then its committed offset, so the handover repeats nothing."""
        group, client_id = self.member.group, self.member.client_id
        try:
            holder = self.consumer.lock_queue(group, client_id, *key)
            if holder != client_id:
                log.debug("group %s: %s/%s is still held by %s; next heartbeat", group, *key, holder)
                return
            offset = self._start_offset(key)
        except RocketSparkError as exc:
            log.warning("group %s: cannot start %s/%s yet: %s", group, *key, exc)
            return
        known = -1 if self.resets_seen is None else self.resets_seen.get(key[0], 0)
        worker = Worker(key, offset, offset, reset_version=known if key[0] in self.member.topics else -1)
        worker.thread = threading.Thread(target=self.pull, args=(worker,), name=f"pull-{key[0]}-{key[1]}", daemon=True)
        self.workers[key] = worker
        worker.thread.start()

    def release_all(self) -> None:
        """Give up every queue (the member leaves the group)."""
        with self.lock:
            self._release(list(self.workers))

    def _release(self, keys: list[QueueKey]) -> None:
        """Stop the queues' workers and commit where each got to. Every worker is told to stop
        before any is waited for, so releasing many costs one long poll, not one each."""
        workers = [w for w in (self.workers.pop(key, None) for key in keys) if w is not None]
        for worker in workers:
            worker.stop.set()
        for worker in workers:
            if worker.thread is not None:
                worker.thread.join(10)
            self.apply_reset(worker)
            self.commit(worker)
            try:
                self.consumer.unlock_queue(self.member.group, self.member.client_id, *worker.key)
            except RocketSparkError as exc:  # it lapses when this member leaves the group
                log.warning("group %s: unlocking %s/%s failed: %s", self.member.group, *worker.key, exc)

    def commit(self, worker: Worker) -> None:
        """Store where the worker got to, if it moved since the last commit."""
        if worker.offset == worker.committed:
            return
        try:
            version = worker.reset_version if worker.reset_version >= 0 else None
            self.consumer.commit_offset(self.member.group, *worker.key, worker.offset, reset_version=version)
            worker.committed = worker.offset
        except RocketSparkError as exc:
            log.warning("group %s: commit of %s/%s failed: %s", self.member.group, *worker.key, exc)

    # -- admin offset resets -------------------------------------------------------------------

    def follow_resets(self, answers: list[RemotingCommand], *, complete: bool) -> None:
        """Move owned queues to an admin's offset reset the brokers tell of (``admin
        reset-offset``), each reset once. Resets made before this member knew of them are in the
        committed offsets it started from: the first heartbeat every broker answered only
        learns their ids. A worker commits with the id of the last reset it applied, and the
        broker drops a commit that predates a later reset."""
        latest: dict[str, tuple[int, dict[str, int]]] = {}
        for answer in answers:
            for topic, (version, offsets) in (answer.ext.get("resets") or {}).items():
                if topic in self.member.topics and int(version) > latest.get(topic, (-1, {}))[0]:
                    latest[topic] = (int(version), offsets)
        if self.resets_seen is None:
            if complete:
                self.resets_seen = {topic: version for topic, (version, _) in latest.items()}
            return
        seen = self.resets_seen
        with self.lock, self._reset_lock:
            for topic, (version, offsets) in latest.items():
                if version <= seen.get(topic, 0):
                    continue
                seen[topic] = version
                log.info("group %s: offsets of %s reset by an admin; moving there", self.member.group, topic)
                for (t, queue_id), worker in self.workers.items():
                    if t == topic and str(queue_id) in offsets:
                        worker.reset_to = (version, int(offsets[str(queue_id)]))

    def apply_reset(self, worker: Worker) -> None:
        """Continue from the reset offset and commit it (over anything committed since)."""
        with self._reset_lock:
            pending, worker.reset_to = worker.reset_to, None
        if pending is not None:
            worker.reset_version, worker.offset, worker.committed = pending[0], pending[1], -1
            self.commit(worker)
