"""The nameserver's route table: which broker serves which topic, and who is alive.

RocketMQ's ``RouteInfoManager`` in four maps, here as one class:

- ``brokers``: broker name -> its live entry (cluster, address, permission, last heartbeat);
- ``clusters``: cluster name -> broker names;
- ``topic_queues``: topic -> broker name -> QueueData (queue counts and permission);
- the liveness scan drops a broker silent for longer than ``broker_expired_ms``.

Every mutating method returns the topics whose route it changed, so that route-change
notification (a later layer) knows what to push.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any

from rocketspark.protocol.static_mapping import TopicQueueMappingDetail, merge_details
from rocketspark.protocol.types import BrokerData, Perm, QueueData, TopicConfig, TopicRouteData


@dataclass
class BrokerLive:
    cluster: str
    name: str
    address: str
    perm: int
    version: int = 0
    last_update: float = field(default_factory=time.monotonic)
    topics: set[str] = field(default_factory=set)

    def touch(self) -> None:
        """Heard from (a registration, or a data-version check that found it current)."""
        self.last_update = time.monotonic()


class RouteTable:
    def __init__(self, broker_expired_ms: int) -> None:
        self.broker_expired_s = broker_expired_ms / 1000
        self.brokers: dict[str, BrokerLive] = {}
        self.clusters: dict[str, set[str]] = {}
        self.topic_queues: dict[str, dict[str, QueueData]] = {}
        self.static: dict[str, dict[str, TopicQueueMappingDetail]] = {}  # topic -> broker -> detail

    # -- registration --------------------------------------------------------------------------

    def register(self, registration: dict[str, Any]) -> set[str]:
        """Apply a broker's registration; return the topics whose route changed."""
        name, cluster, address = registration["broker"], registration["cluster"], registration["addr"]
        topics = [TopicConfig.from_wire(t) for t in registration.get("topics", [])]
        live = self.brokers.get(name)
        changed: set[str] = set()
        if live is None or live.address != address or live.cluster != cluster:
            if live is not None:
                changed |= self.unregister(name)
            live = self.brokers[name] = BrokerLive(cluster, name, address, int(registration.get("perm", 6)))
            self.clusters.setdefault(cluster, set()).add(name)
        live.perm = int(registration.get("perm", live.perm))
        live.version = int(registration.get("version", 0))
        live.touch()
        current = {t.name for t in topics}
        incremental = bool(registration.get("incremental", False))  # only these topics; keep the rest
        for gone in set() if incremental else live.topics - current:
            changed |= self._remove_queue(gone, name)
        for config in topics:
            data = QueueData(name, config.read_queue_nums, config.write_queue_nums, config.perm)
            per_broker = self.topic_queues.setdefault(config.name, {})
            if per_broker.get(name) != data:
                per_broker[name] = data
                changed.add(config.name)
        live.topics = live.topics | current if incremental else current
        changed |= self._register_static(name, registration.get("static", []), incremental=incremental)
        return changed

    def _register_static(
        self, broker_name: str, details: list[dict[str, Any]], *, incremental: bool = False
    ) -> set[str]:
        changed: set[str] = set()
        fresh = {d.topic: d for d in (TopicQueueMappingDetail.from_wire(w) for w in details)}
        for topic, per_broker in [] if incremental else list(self.static.items()):
            if broker_name in per_broker and topic not in fresh:
                del per_broker[broker_name]
                changed.add(topic)
                if not per_broker:
                    del self.static[topic]
        for topic, detail in fresh.items():
            per_broker = self.static.setdefault(topic, {})
            if per_broker.get(broker_name) != detail:
                per_broker[broker_name] = detail
                changed.add(topic)
        return changed

    def unregister(self, name: str) -> set[str]:
        """Forget a broker (clean shutdown or silence); return the topics it served."""
        live = self.brokers.pop(name, None)
        if live is None:
            return set()
        members = self.clusters.get(live.cluster, set())
        members.discard(name)
        if not members:
            self.clusters.pop(live.cluster, None)
        changed: set[str] = set()
        for topic in list(live.topics):
            changed |= self._remove_queue(topic, name)
        changed |= self._register_static(name, [])
        return changed

    def _remove_queue(self, topic: str, broker_name: str) -> set[str]:
        per_broker = self.topic_queues.get(topic)
        if per_broker is None or per_broker.pop(broker_name, None) is None:
            return set()
        if not per_broker:
            del self.topic_queues[topic]
        return {topic}

    def scan_inactive(self) -> dict[str, set[str]]:
        """Drop brokers silent for longer than the expiry; return each one's changed topics."""
        cutoff = time.monotonic() - self.broker_expired_s
        dead = [name for name, live in self.brokers.items() if live.last_update < cutoff]
        return {name: self.unregister(name) for name in dead}

    # -- admin ---------------------------------------------------------------------------------

    def delete_topic(self, topic: str) -> bool:
        per_broker = self.topic_queues.pop(topic, None)
        self.static.pop(topic, None)
        for live in self.brokers.values():
            live.topics.discard(topic)
        return per_broker is not None

    def set_write_perm(self, broker_name: str, writable: bool) -> set[str]:
        """Wipe or restore write permission of every topic on a broker; return those topics.

        All of them, even one whose permission already had the new value: the broker itself
        re-registers with its new permission just before (``Admin.wipe_write_perm``), and that
        registration, a whole broker's, notifies nobody. This is the change to announce.
        """
        live = self.brokers.get(broker_name)
        if live is None:
            return set()
        live.perm = live.perm | Perm.WRITE if writable else live.perm & ~Perm.WRITE
        touched: set[str] = set()
        for topic in live.topics:
            per_broker = self.topic_queues.get(topic, {})
            data = per_broker.get(broker_name)
            if data is not None:
                perm = data.perm | Perm.WRITE if writable else data.perm & ~Perm.WRITE
                per_broker[broker_name] = replace(data, perm=perm)
                touched.add(topic)
        return touched

    # -- queries -------------------------------------------------------------------------------

    def route(self, topic: str) -> TopicRouteData | None:
        per_broker = self.topic_queues.get(topic)
        if not per_broker:
            return None
        names = sorted(per_broker)
        brokers = tuple(
            BrokerData(self.brokers[n].cluster, n, self.brokers[n].address) for n in names if n in self.brokers
        )
        mapping = merge_details(topic, list(self.static.get(topic, {}).values()))
        return TopicRouteData(topic, brokers, tuple(per_broker[n] for n in names), mapping)

    def cluster_info(self) -> dict[str, Any]:
        now = time.monotonic()
        return {
            "clusters": {c: sorted(members) for c, members in sorted(self.clusters.items())},
            "brokers": {
                name: {
                    "cluster": live.cluster,
                    "addr": live.address,
                    "perm": live.perm,
                    "topics": len(live.topics),
                    "lastUpdateAgoMs": int((now - live.last_update) * 1000),
                    "version": live.version,
                }
                for name, live in sorted(self.brokers.items())
            },
        }
