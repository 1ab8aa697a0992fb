"""What the console shows, as JSON-ready dictionaries built from ``Admin`` calls: the cluster
and its replica groups, topics, a topic's logical queues with their segments, consumer groups
with lag, a message found by id, and the cluster's throughput sampled every few seconds."""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, Protocol

from rocketspark.client.logical import topic_queue_ids
from rocketspark.errors import RocketSparkError
from rocketspark.protocol.types import Perm

if TYPE_CHECKING:
    from rocketspark.client.admin import Admin

log = logging.getLogger(__name__)


def overview(admin: Admin) -> dict[str, Any]:
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


BODY_SHOWN = 2000  # characters of a body the page shows


def message(admin: Admin, msg_id: str) -> dict[str, Any]:
    """The message with this id, client id or offset id (``Admin.query_message_by_id``). Its
    ``queueId`` is the topic's queue id (as ``Consumer.queues`` and Spark's ``queueId`` number
    them), null when its broker is not among the topic's readable brokers now."""
    m = admin.query_message_by_id(msg_id)
    text = m.body.decode("utf-8", errors="replace")
    try:
        numbered = topic_queue_ids(admin.queues(m.topic))
    except RocketSparkError:  # the topic deleted since
        numbered = {}
    return {
        "msgId": m.msg_id,
        "offsetMsgId": m.offset_msg_id,
        "topic": m.topic,
        "queueId": numbered.get((m.broker_name, m.queue_id)),
        "queueOffset": m.queue_offset,
        "broker": m.broker_name,
        "tag": m.tags,
        "keys": m.keys,
        "properties": m.properties,
        "bornMs": m.born_timestamp,
        "storeMs": m.store_timestamp,
        "bodyBytes": len(m.body),
        "body": text[:BODY_SHOWN],
    }


def topics(admin: Admin) -> list[dict[str, Any]]:
    return [
        {"name": t.name, "kind": t.kind, "queues": t.queues, "brokers": list(t.brokers)}
        for t in admin.describe_topics()
    ]


def topic(admin: Admin, name: str) -> dict[str, Any]:
    """A topic's logical queues, each with its segments in order: the picture RIP-21 draws."""
    route = admin.topic_route(name)
    queues = []
    for status in admin.topic_status(name):
        segments = [
            {
                "broker": s.broker_name,
                "brokerQueueId": s.queue_id,  # the queue on that broker; the topic's id is the queue's
                "gen": s.gen,
                "logicalStart": s.logical_start,
                "logicalEnd": s.logical_end,
                "state": s.state.value,
                "messages": max(0, s.max_offset - s.min_offset),
            }
            for s in status.segments
        ]
        queues.append(
            {
                "queueId": status.queue_id,
                "minOffset": status.min_offset,
                "maxOffset": status.max_offset,
                "lastStoreMs": status.last_store_ms,
                "segments": segments,
            }
        )
    return {"name": name, "static": route.mapping is not None, "queues": queues}


def groups(admin: Admin) -> list[dict[str, Any]]:
    return [
        {"group": g.group, "topics": list(g.topics), "members": list(g.members), "lag": g.lag} for g in admin.groups()
    ]


WATCHED_S = 60.0


class Counters(Protocol):
    """What the throughput sampler reads: the brokers and their counters (an ``Admin``)."""

    def brokers(self) -> dict[str, str]: ...

    def broker_counters(self, name: str) -> dict[str, Any]: ...


class Throughput:
    """Messages stored per second, cluster-wide and per broker, sampled every ``interval_s``
    from the brokers' counters; the last ``keep`` samples (a 5-minute chart by default).
    It samples only while someone looks (the chart was asked for within ``WATCHED_S``): an
    unwatched console costs the cluster nothing."""

    def __init__(self, admin: Counters, interval_s: float = 2.0, keep: int = 150) -> None:
        self.admin = admin
        self.interval_s = interval_s
        self.samples: deque[dict[str, Any]] = deque(maxlen=keep)
        self._last: dict[str, tuple[float, int]] = {}
        self._watched_until = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="console-throughput", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            if time.monotonic() > self._watched_until:
                self._last.clear()  # a rate across an unwatched stretch would mislead
                continue
            try:
                self.sample()
            except RocketSparkError as exc:  # a broker away for a moment: the chart has a gap
                log.debug("console: throughput sample failed: %s", exc)
            except Exception:
                log.exception("console: throughput sample failed")

    def sample(self) -> None:
        now = time.time()
        rates: dict[str, float] = {}
        for name in sorted(self.admin.brokers()):
            stored = int(self.admin.broker_counters(name)["messagesStored"])
            before = self._last.get(name)
            self._last[name] = (now, stored)
            if before is not None and now > before[0]:
                rates[name] = max(0.0, (stored - before[1]) / (now - before[0]))
        if rates:
            self.samples.append({"t": int(now * 1000), "total": sum(rates.values()), "brokers": rates})

    def series(self) -> list[dict[str, Any]]:
        self._watched_until = time.monotonic() + WATCHED_S
        return list(self.samples)
