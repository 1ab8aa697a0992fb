"""A broker's metrics, read from its state when Prometheus scrapes (see
:mod:`rocketspark.metrics`). Series per topic and per (group, topic, queue) follow the topic
table and the offsets table, so they go away with a deleted topic; nothing is per message.

The collector is made with the few pieces of the broker it reads (``BrokerReadings``), like
the handlers' contexts.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from prometheus_client import Histogram
from prometheus_client.metrics_core import Metric

from broker.diskuse import used_ratio
from broker.ha.role import GroupView
from broker.lag import QueueLag
from broker.store.stats import StoreStats
from rocketspark.metrics.node import FLUSH_LATENCY_BUCKETS_MS, Families, NodeMetrics
from rocketspark.remoting.server import RequestGuard


class Storage(Protocol):
    """What a scrape reads of the store."""

    @property
    def path(self) -> Path: ...
    @property
    def stats(self) -> StoreStats: ...
    @property
    def log_max_offset(self) -> int: ...
    @property
    def flushed_offset(self) -> int: ...
    def disk_usage(self) -> int: ...


class Office(Protocol):
    """This replica's place in its group (``broker.ha.role.Role``)."""

    @property
    def is_master(self) -> bool: ...
    @property
    def view(self) -> GroupView | None: ...


@dataclass(frozen=True, slots=True)
class BrokerReadings:
    """What the broker's collector reads: the store, the groups' lags, the role, and a few
    figures asked at each scrape."""

    store: Storage
    lags: Iterable[QueueLag]
    role: Office
    replica_offsets: Callable[[], dict[int, int]]  # the master's view of its slaves' logs
    groups: Callable[[], set[str]]  # groups with committed offsets here
    live_consumers: Callable[[], dict[str, int]]  # group consumers heard from lately, by group
    topic_count: Callable[[], int]
    perm: Callable[[], int]
    refusing_writes: Callable[[], bool]  # the disk is too full
    guard: RequestGuard | None
    started_at: float


def flush_latency(metrics: NodeMetrics) -> Callable[[float], None]:
    """The log flush's latency histogram, as the store's ``on_flush`` (seconds in)."""
    flush = Histogram(
        "rocketspark_storage_flush_latency",
        "Time an fsync of the commit log took, in milliseconds",
        metrics.node.names,
        buckets=FLUSH_LATENCY_BUCKETS_MS,
        registry=metrics.registry,
    ).labels(*metrics.node.values)
    return lambda seconds: flush.observe(seconds * 1000)


class BrokerCollector:
    def __init__(self, families: Families, broker: BrokerReadings) -> None:
        self.broker = broker
        self.f = families
        self._size = 0

    def collect(self) -> Iterator[Metric]:
        yield from self._traffic()
        yield from self._lag()
        yield from self._storage()
        yield from self._replication()
        yield from self._membership()
        guard = self.broker.guard
        if guard is not None:
            yield self.f.refusals(guard.refusals)

    def _traffic(self) -> Iterator[Metric]:
        topics = list(self.broker.store.stats.topics.items())
        f = self.f
        typed = [(t, kind, n, size) for t, s in topics for kind, n, size in s.by_type()]
        yield f.counter(
            "rocketmq_messages_in",
            "Messages stored, by topic and message type (normal, fifo, delay, transaction)",
            ["topic", "message_type"],
            [([t, kind], n) for t, kind, n, _ in typed],
        )
        yield f.counter(
            "rocketmq_throughput_in",
            "Bytes stored, by topic and message type",
            ["topic", "message_type"],
            [([t, kind], size) for t, kind, _, size in typed],
        )
        yield f.counter(
            "rocketmq_messages_out", "Messages read, by topic", ["topic"], [([t], s.messages_out) for t, s in topics]
        )
        yield f.counter(
            "rocketmq_throughput_out", "Bytes read, by topic", ["topic"], [([t], s.bytes_out) for t, s in topics]
        )

    def _lag(self) -> Iterator[Metric]:
        rows = [([q.group, q.topic, str(q.queue_id)], q.lag) for q in self.broker.lags]
        yield self.f.gauge(
            "rocketmq_consumer_lag_messages",
            "Messages after a group's committed offset, by queue (counted in segments, as admin progress counts)",
            ["consumer_group", "topic", "queue_id"],
            rows,
        )

    def _storage(self) -> Iterator[Metric]:
        store, f = self.broker.store, self.f
        try:
            self._size = store.disk_usage()
        except (RuntimeError, OSError):  # a queue added, or a segment deleted, as this thread walked them
            pass
        yield f.gauge("rocketmq_storage_size", "Bytes the store's files take on disk", rows=[((), self._size)])
        yield f.gauge(
            "rocketmq_storage_flush_behind_bytes",
            "Bytes of the commit log written but not yet flushed to disk",
            rows=[((), max(0, store.log_max_offset - store.flushed_offset))],
        )
        yield f.gauge(
            "rocketspark_disk_used_ratio",
            "How full the data directory's file system is (0-1)",
            rows=[((), used_ratio(store.path))],
        )
        yield f.gauge(
            "rocketspark_disk_refusing_writes",
            "1 while sends are refused because the disk is above disk_refuse_writes_ratio",
            rows=[((), int(self.broker.refusing_writes()))],
        )
        stats = store.stats
        yield f.counter(
            "rocketspark_storage_segments_deleted",
            "Commit-log segments deleted: reason is retention (age) or disk (the disk was filling up)",
            ["reason"],
            [
                (["retention"], stats.segments_deleted_for_age),
                (["disk"], stats.segments_deleted_for_space),
            ],
        )
        yield f.gauge("rocketmq_topic_number", "Topics on this broker", rows=[((), self.broker.topic_count())])
        yield f.gauge(
            "rocketmq_broker_permission",
            "The broker's permission (6 read-write, 4 read-only)",
            rows=[((), self.broker.perm())],
        )

    def _replication(self) -> Iterator[Metric]:
        broker, f = self.broker, self.f
        view = broker.role.view
        yield f.gauge(
            "rocketspark_ha_master",
            "1 while this replica is its group's master",
            rows=[((), int(broker.role.is_master))],
        )
        if view is None or not broker.role.is_master:
            return
        yield f.gauge(
            "rocketspark_ha_sync_state_set_size",
            "Replicas in the group's SyncStateSet, master included",
            rows=[((), len(view.sync_state_set))],
        )
        end = broker.store.log_max_offset
        yield f.gauge(
            "rocketspark_ha_replica_lag_bytes",
            "Bytes of the master's log a replica does not hold yet",
            ["replica_id"],
            [([str(rid)], max(0, end - offset)) for rid, offset in broker.replica_offsets().items()],
        )

    def _membership(self) -> Iterator[Metric]:
        yield self.f.gauge(
            "rocketmq_consumer_group_number",
            "Consumer groups with committed offsets here",
            rows=[((), len(self.broker.groups()))],
        )
        yield self.f.gauge(
            "rocketmq_consumer_connections",
            "Group consumers heard from lately, by group",
            ["consumer_group"],
            [([g], n) for g, n in sorted(self.broker.live_consumers().items())],
        )
        uptime = time.time() - self.broker.started_at
        yield self.f.gauge("rocketspark_uptime_seconds", "Seconds since the broker started", rows=[((), uptime)])
