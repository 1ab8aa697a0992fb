"""A nameserver's metrics, read from its state when Prometheus scrapes (see
:mod:`rocketspark.metrics`): route pushes sent and suppressed, what the route table holds,
and with the controller each replica group's SyncStateSet and how far each replica is behind
its master (from their heartbeats)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.metrics_core import Metric

from rocketspark.metrics.node import Families, Node, NodeMetrics

if TYPE_CHECKING:
    from nameserver.server import NameServer


def nameserver_metrics(nameserver: NameServer, node_id: str) -> NodeMetrics:
    metrics = NodeMetrics(Node("", "nameserver", node_id))
    nameserver.dispatcher.observer = metrics
    metrics.add(NameServerCollector(nameserver, metrics.families))
    return metrics


class NameServerCollector:
    def __init__(self, nameserver: NameServer, families: Families) -> None:
        self.nameserver = nameserver
        self.f = families

    def collect(self) -> Iterator[Metric]:
        ns, f = self.nameserver, self.f
        counters = ns.notifier.counters
        yield f.counter(
            "rocketspark_route_pushes",
            "Route changes pushed to subscribed clients (sent), held back by the hotspot rule (suppressed), or "
            "lost because the client's stream was gone or full (dropped)",
            ["result"],
            [
                (["sent"], counters.notifications_sent),
                (["suppressed"], counters.suppressed),
                (["dropped"], counters.dropped),
            ],
        )
        yield f.gauge(
            "rocketspark_route_subscriptions",
            "Topic route subscriptions held",
            rows=[((), ns.notifier.subscription_count)],
        )
        yield f.gauge("rocketspark_brokers", "Brokers registered and alive", rows=[((), len(ns.routes.brokers))])
        yield f.gauge("rocketmq_topic_number", "Topics in the route table", rows=[((), len(ns.routes.topic_queues))])
        guard = ns.dispatcher.guard
        if guard is not None:
            yield f.refusals(getattr(guard, "refusals", {}))
        if ns.controller is not None:
            yield from self._replica_groups()

    def _replica_groups(self) -> Iterator[Metric]:
        controller = self.nameserver.controller
        assert controller is not None
        views = [controller.view(group) for group in controller.raft.snapshot().values()]
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
