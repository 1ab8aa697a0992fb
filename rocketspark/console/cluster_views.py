"""The console's overview page, as a JSON-ready dictionary: the clusters and their brokers,
the replica groups, and every server's ``/metrics`` URL."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any, Protocol

from rocketspark.errors import RocketSparkError
from rocketspark.protocol.types import Perm

if TYPE_CHECKING:
    from rocketspark.client.server_admin import Servers
    from rocketspark.protocol.replica import ReplicaGroup


class ClusterReader(Protocol):
    """What the overview reads (an ``Admin``)."""

    @property
    def nameservers(self) -> list[str]: ...

    @property
    def servers(self) -> Servers: ...

    def cluster_list(self) -> dict[str, Any]: ...

    def replica_groups(self) -> dict[str, ReplicaGroup]: ...


def overview(admin: ClusterReader) -> dict[str, Any]:
    """Clusters, brokers (address, permission, topics, last heartbeat, /metrics URL), the
    nameservers' /metrics URLs and replica groups."""
    info = admin.cluster_list()
    urls = admin.servers.metrics_urls(sorted(info["brokers"]))
    clusters = []
    for cluster, names in sorted(info["clusters"].items()):
        brokers = []
        for name in sorted(names):
            b = info["brokers"][name]
            brokers.append(
                {
                    "name": name,
                    "address": b["addr"],
                    "perm": Perm.describe(b["perm"]),
                    "topics": b["topics"],
                    "heartbeatAgoMs": b["lastUpdateAgoMs"],
                    "metricsUrl": urls[name],
                }
            )
        clusters.append({"name": cluster, "brokers": brokers})
    try:
        groups = [asdict(g) for g in admin.replica_groups().values()]
    except RocketSparkError:  # no controller: brokers are groups of one
        groups = []
    nameservers = [{"address": a, "metricsUrl": urls[a]} for a in admin.nameservers]
    return {
        "nameservers": admin.nameservers,
        "nameserverMetrics": nameservers,
        "clusters": clusters,
        "replicaGroups": groups,
    }
