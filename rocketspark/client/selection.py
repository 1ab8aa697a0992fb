"""Queue selection: where a send goes, for the producer and the Spark sink alike.

A message pinned by ``queue_id`` goes to that queue; by a sharding key, to
``queue_for_key(key, queues)`` (CRC32 of the key's UTF-8, modulo the queue count, as
RocketMQ's ``SelectMessageQueueByHash``), so a key always lands on one queue and stays ordered;
otherwise round robin over the writable queues, avoiding a broker that just failed and, with
the latency table on, slow ones. A static topic is indexed by logical queue, so a key keeps its
queue across remaps.
"""

from __future__ import annotations

import itertools
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from rocketspark.client.fault import LatencyFaultTolerance
from rocketspark.client.logical import logical_view
from rocketspark.client.routes import write_queues
from rocketspark.errors import (
    InvalidParameterError,
    NoPermissionError,
    NoRouteInfoError,
    NotLeaderForQueueError,
    NotMasterError,
)
from rocketspark.protocol.types import Message, Perm, QueueData, TopicRouteData


def key_hash(key: str) -> int:
    """The hash a sharding key is placed by."""
    return zlib.crc32(key.encode())


def queue_for_key(key: str, queues: int) -> int:
    """The queue a sharding key always lands on, of ``queues``."""
    return slot(key_hash(key), queues)


def slot(hashed: int, queues: int) -> int:
    """Where a key's hash lands among ``queues``: the one placement rule (``queues_for_keys``
    applies it to many rows at once)."""
    return hashed % queues


def queues_for_keys(
    keys: Sequence[str], index: npt.NDArray[np.int64], queues: npt.NDArray[np.int64]
) -> npt.NDArray[np.int64]:
    """``queue_for_key`` of many rows at once: ``keys`` are the distinct keys (hashed once
    each), ``index`` each row's key among them, ``queues`` each row's queue count."""
    hashes = np.array([key_hash(k) for k in keys], dtype=np.int64)
    out: npt.NDArray[np.int64] = hashes[index] % queues
    return out


@dataclass(frozen=True, slots=True)
class Target:
    """Where one send goes: a broker's physical queue, or a static topic's logical queue."""

    broker_name: str
    queue_id: int  # physical queue id
    logical_id: int | None = None  # set for a static topic: the broker checks it leads it
    epoch: int = 0


@dataclass(frozen=True, slots=True)
class PublishInfo:
    route: TopicRouteData
    queues: list[Target]  # writable now: what round robin picks from
    stable: list[Target | None]  # every queue, writable or not: what keys and ids index (None: no leader)
    template: str | None  # "TBW102" when sending through the auto-create template
    electing: frozenset[str] = frozenset()  # writable replica groups with no master right now
    groups: frozenset[str] = frozenset()  # the route's replica groups (``replica_groups``), looked up every send


def replica_groups(route: TopicRouteData) -> frozenset[str]:
    """The route's brokers that are replica groups (a connection failure there may be a
    failover, and a send there watches its master)."""
    return frozenset(b.broker_name for b in route.brokers if b.replicas)


def publish_info_of(route: TopicRouteData) -> PublishInfo:
    """Where sends to the route's topic can go. A normal topic: its write queues in view
    order. A static topic: one target per logical queue, at its leader segment (``hash % N``
    over logical ids, so a key keeps its queue across remaps)."""
    stable: list[Target | None]
    if route.mapping is not None:
        stable = [
            Target(leader.broker_name, leader.queue_id, queue.queue_id, queue.epoch)
            if (leader := queue.leader)
            else None
            for queue in logical_view(route)
        ]
    else:
        stable = [Target(r.broker_name, r.queue_id) for r in write_queues(route, writable_only=False)]
        if not stable:
            raise NoRouteInfoError(
                f'No route info of this topic "{route.topic}": its route lists no queues', topic=route.topic
            )
    writable = {q.broker_name for q in route.queues if q.perm & Perm.WRITE}
    electing = frozenset(b for b in writable if route.address_of(b) == "")
    queues = [t for t in stable if t and t.broker_name in writable and t.broker_name not in electing]
    return PublishInfo(route, queues, stable, None, electing, replica_groups(route))


def template_info(template: TopicRouteData, name: str, queue_nums: int) -> PublishInfo:
    """Where a send that auto-creates its topic goes: the template's write queues, at most
    ``queue_nums`` on each broker, as many as the broker will create for the topic."""
    shrunk = tuple(
        QueueData(q.broker_name, min(queue_nums, q.read_queue_nums), min(queue_nums, q.read_queue_nums), q.perm)
        for q in template.queues
    )
    route = TopicRouteData(template.topic, template.brokers, shrunk)
    queues = [Target(r.broker_name, r.queue_id) for r in write_queues(route)]
    return PublishInfo(route, queues, list(queues), name, groups=replica_groups(route))


def no_master(topic: str, groups: frozenset[str] | set[str]) -> NotMasterError:
    """What a send is told while a replica group it must go to elects a master."""
    names = ", ".join(sorted(groups))
    return NotMasterError(
        f'broker group(s) {names} of topic "{topic}" have no master right now (an election is under way); the '
        "send waits for the new one within its send timeout"
    )


@dataclass(frozen=True, slots=True)
class Pin:
    """What fixes a send to one queue: a queue id, or a sharding key's hash. Sends with equal
    pins go to the same queue, so a batch is grouped by pin; a pinned send is retried on its
    queue, never moved (that would break the key's order)."""

    topic: str
    value: int  # the queue id, or the key's hash
    by_key: bool = False

    def target(self, queues: list[Target | None]) -> Target:
        """The queue pinned, indexing every queue so that a broker losing write permission
        makes its keys fail instead of silently moving."""
        if self.by_key:
            index = slot(self.value, len(queues))
        elif 0 <= self.value < len(queues):
            index = self.value
        else:
            raise InvalidParameterError(
                f'queue {self.value} does not exist: topic "{self.topic}" has {len(queues)} queues'
            )
        target = queues[index]
        if target is None:
            raise NotLeaderForQueueError(
                f'logical queue {index} of "{self.topic}" has no open segment right now (a remap is under way)'
            )
        return target


def pin_of(message: Message) -> Pin | None:
    """The message's pin: its ``queue_id`` first, then its sharding key (the hash
    ``queue_for_key`` places); None when neither is set: round robin."""
    if message.queue_id is not None:
        return Pin(message.topic, message.queue_id)
    if message.sharding_key is not None:
        return Pin(message.topic, key_hash(message.sharding_key), by_key=True)
    return None


class RoundRobin:
    """Round robin over writable queues, skipping a broker to avoid and, with a latency table,
    the brokers it marks."""

    def __init__(self, fault: LatencyFaultTolerance | None) -> None:
        self.fault = fault
        self._counter = itertools.count()

    def next(self, queues: list[Target], avoid: str | None) -> Target:
        if not queues:
            raise NoPermissionError(
                "none of the topic's brokers accepts writes now (write permission wiped on all of them); "
                "add it back with `rocketspark admin add-write-perm <broker>`"
            )
        fault = self.fault
        for _ in range(len(queues)):
            ref = queues[next(self._counter) % len(queues)]
            if ref.broker_name != avoid and (fault is None or fault.available(ref.broker_name)):
                return ref
        if fault is not None:  # every broker is marked: fall back to the least bad one
            brokers = sorted(
                {q.broker_name for q in queues if q.broker_name != avoid} or {q.broker_name for q in queues}
            )
            best = fault.least_bad(brokers)
            candidates = [q for q in queues if q.broker_name == best]
            return candidates[next(self._counter) % len(candidates)]
        return queues[next(self._counter) % len(queues)]
