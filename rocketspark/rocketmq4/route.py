"""A topic's route as RocketMQ's nameserver writes it for 4.x clients (``TopicRouteData``), and
the cluster as GET_BROKER_CLUSTER_INFO answers it (``ClusterInfo``).

Normal topics: one ``queueDatas`` entry per broker group, and ``brokerDatas`` whose
``brokerAddrs`` name the master as broker id 0 and the live slaves as 1, 2, ... (RocketMQ's
MASTER_ID; a group between masters has no id 0, so clients send it nothing and read from a
slave).

Static topics (RIP-21): a 4.x client knows nothing of logical queues, and gets them as the
queues of one broker named ``__syslo__global__`` (the name RocketMQ 5's own client gives a
logical queue's broker), whose address is one of the topic's brokers. Every broker serves a
static topic's logical queues, wherever their segments are, so a remap moves nothing the
client sees: its queue ids, offsets and that address stay. RocketMQ 5's mapping fields
(``topicQueueMappingByBroker``: each broker's ``currIdMap`` of the logical queues it leads)
come along for the Java 5 client, which sends each logical queue to its leader instead.

The JSON is compact, keys quoted, ``queueDatas``, ``brokerDatas`` and ``filterServerTable``
always present: what every 4.x client parses (the research notes' "safe output").
"""

from __future__ import annotations

import json
import zlib
from typing import Any, Final

from rocketspark.protocol.static_mapping import MOCK_BROKER_NAME, SCOPE_GLOBAL
from rocketspark.protocol.types import BrokerData, Perm, TopicRouteData

MASTER_ID: Final = "0"


def broker_addrs(broker: BrokerData) -> dict[str, str]:
    """``brokerAddrs`` of a group: the master as id 0 (when it has one), the slaves from 1."""
    addrs = {MASTER_ID: broker.address} if broker.address else {}
    for i, replica in enumerate(sorted(r for r in broker.replicas if r != broker.address), start=1):
        addrs[str(i)] = replica
    return addrs


def _broker_data(broker: BrokerData) -> dict[str, Any]:
    return {
        "brokerAddrs": broker_addrs(broker),
        "brokerName": broker.broker_name,
        "cluster": broker.cluster,
        "enableActingMaster": False,
    }


def _queue_data(name: str, read: int, write: int, perm: int) -> dict[str, Any]:
    return {"brokerName": name, "perm": perm, "readQueueNums": read, "topicSysFlag": 0, "writeQueueNums": write}


def serving_broker(route: TopicRouteData) -> BrokerData | None:
    """The broker a 4.x client reaches a static topic's logical queues through: one with a
    master, picked by the topic's name (stable while it stays in the route; topics spread)."""
    masters = sorted((b for b in route.brokers if b.address), key=lambda b: b.broker_name)
    if not masters:
        return None
    return masters[zlib.crc32(route.topic.encode()) % len(masters)]


def route_json(route: TopicRouteData) -> bytes:
    """The TopicRouteData body of GET_ROUTEINFO_BY_TOPIC."""
    brokers = sorted(route.brokers, key=lambda b: b.broker_name)
    body: dict[str, Any] = {"brokerDatas": [_broker_data(b) for b in brokers], "filterServerTable": {}}
    mapping = route.mapping
    if mapping is None:
        body["queueDatas"] = [
            _queue_data(q.broker_name, q.read_queue_nums, q.write_queue_nums, q.perm)
            for q in sorted(route.queues, key=lambda q: q.broker_name)
        ]
    else:
        serving = serving_broker(route)
        total = mapping.total_queues
        body["queueDatas"] = [_queue_data(MOCK_BROKER_NAME, total, total, Perm.READ_WRITE)]
        if serving is not None:
            body["brokerDatas"].append(
                {
                    "brokerAddrs": {MASTER_ID: serving.address},
                    "brokerName": MOCK_BROKER_NAME,
                    "cluster": serving.cluster,
                    "enableActingMaster": False,
                }
            )
        leading: dict[str, dict[str, int]] = {}
        for logical_id, items in sorted(mapping.queues.items()):
            if items and not items[-1].sealed:
                leading.setdefault(items[-1].bname, {})[str(logical_id)] = items[-1].queue_id
        body["topicQueueMappingByBroker"] = {
            name: {
                "bname": name,
                "currIdMap": ids,
                "dirty": False,
                "epoch": mapping.epoch,
                "scope": SCOPE_GLOBAL,
                "topic": route.topic,
                "totalQueues": total,
            }
            for name, ids in sorted(leading.items())
        }
    return json.dumps(body, separators=(",", ":"), sort_keys=True).encode()


def cluster_json(brokers: list[BrokerData]) -> bytes:
    """The ClusterInfo body of GET_BROKER_CLUSTER_INFO (mqadmin clusterList, the Dashboard)."""
    clusters: dict[str, list[str]] = {}
    for b in brokers:
        clusters.setdefault(b.cluster, []).append(b.broker_name)
    body = {
        "brokerAddrTable": {b.broker_name: _broker_data(b) for b in brokers},
        "clusterAddrTable": {c: sorted(names) for c, names in sorted(clusters.items())},
    }
    return json.dumps(body, separators=(",", ":"), sort_keys=True).encode()
