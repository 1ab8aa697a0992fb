"""A nameserver's metrics, read from its state when Prometheus scrapes (see
:mod:`rocketspark.metrics`): route pushes sent and suppressed, what the route table holds,
and with the controller each replica group's SyncStateSet and how far each replica is behind
its master (from their heartbeats)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Protocol

from prometheus_client.metrics_core import Metric

from rocketspark.metrics.node import Families
from rocketspark.remoting.server import RequestGuard


class Counted(Protocol):
    """The nameserver's counters (:class:`nameserver.counters.NameServerCounters`)."""

    def to_wire(self) -> dict[str, Any]: ...


class NameServerCollector:
    """Made with what it reads: the counters (GET_COUNTERS' figures), the guard's refusals
    (security on), and the replica groups as the controller shows them (controller on)."""

    def __init__(
        self,
        families: Families,
        counters: Counted,
        guard: RequestGuard | None,
        replica_groups: Callable[[], list[dict[str, Any]]] | None,
    ) -> None:
        self.f = families
        self.counters = counters
        self.guard = guard
        self.replica_groups = replica_groups

    def collect(self) -> Iterator[Metric]:
        f, counters = self.f, self.counters.to_wire()
        yield f.counter(
            "rocketspark_route_pushes",
            "Route changes pushed to subscribed clients (sent), held back by the hotspot rule (suppressed), or "
            "lost because the client's stream was gone or full (dropped)",
            ["result"],
            [
                (["sent"], counters["notificationsSent"]),
                (["suppressed"], counters["notificationsSuppressed"]),
                (["dropped"], counters["notificationsDropped"]),
            ],
        )
        yield f.gauge(
            "rocketspark_route_subscriptions", "Topic route subscriptions held", rows=[((), counters["subscriptions"])]
        )
        yield f.gauge("rocketspark_brokers", "Brokers registered and alive", rows=[((), counters["brokers"])])
        yield f.gauge("rocketmq_topic_number", "Topics in the route table", rows=[((), counters["topics"])])
        if self.guard is not None:
            yield f.refusals(self.guard.refusals)
        if self.replica_groups is not None:
            yield from self._replica_groups(self.replica_groups())

    def _replica_groups(self, views: list[dict[str, Any]]) -> Iterator[Metric]:
        yield self.f.gauge(
            "rocketspark_ha_sync_state_set_size",
            "Replicas in a replica group's SyncStateSet, master included",
            ["group"],
            [([v["brokerName"]], len(v["syncStateSet"])) for v in views],
        )
        rows = []
        for view in views:
            master = next((r for r in view["replicas"] if r["replicaId"] == view["masterReplicaId"]), None)
            if master is None or master["offset"] < 0:
                continue
            for replica in view["replicas"]:
                if replica["offset"] >= 0:
                    rows.append(
                        ([view["brokerName"], str(replica["replicaId"])], max(0, master["offset"] - replica["offset"]))
                    )
        yield self.f.gauge(
            "rocketspark_ha_replica_lag_bytes",
            "Bytes of its master's log a replica did not hold at their last heartbeats",
            ["group", "replica_id"],
            rows,
        )
