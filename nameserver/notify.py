"""Route-change notification (seed 000, RocketMQ issue #3870, never merged upstream).

Clients keep a push stream open to one nameserver and subscribe to the topics they use. When
a topic's route changes, it is marked; a scan every second pushes each subscriber, oneway,
the names of its changed topics, and the client then re-reads those routes. Only names
travel, never routes.

Which changes notify (seed 000's table):

=====================================  =========================================
deleteTopic                            notify
wipe / add write permission            notify
registerBroker naming changed topics   notify those (created, changed, remapped)
registerBroker's other changes         no: a whole broker starting up (hotspot rule)
unregisterBroker, lost broker channel  no: a broker going away (hotspot rule)
=====================================  =========================================

A full registration (start-up, heartbeat) names no topic, so a broker restarting with
hundreds of topics notifies nobody.

Subscriptions belong to the client's live push stream. A subscription asked for while the
client has no open stream is refused (SUBSCRIPTION_REFUSED, ``streamOpen: false``) and nothing
is kept; when the stream ends, for whatever reason (closed, cancelled, the client killed), every
subscription of the client goes with it. Both happen on the event loop, one after the other,
so a subscribe that arrives after its stream closed finds no stream and keeps nothing. A
client that reopens its stream under the same id keeps its subscriptions on the new stream
(``PushHub`` replaces the stream without a close), and subscribes again anyway. Each client
holds at most ``max_per_client`` subscriptions; topics past the cap are refused
(SUBSCRIPTION_REFUSED, ``streamOpen: true``, the topics in ``refused``; the rest were kept),
counted, and the client keeps them fresh by polling. A subscription is answered SUCCESS only
when every topic it named is kept.

Under resource pressure (load average per CPU or memory use above configurable
thresholds) the scan skips its round: pushes stop, route queries go on, and the skipped
rounds show in the counters and the log. Routes still reach clients by their 30 s refresh.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from rocketspark.errors import SubscriptionRefusedError
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.command import RemotingCommand

log = logging.getLogger("nameserver.notify")


@dataclass
class NotifyCounters:
    notifications_sent: int = 0  # pushes that reached a client's stream
    topics_notified: int = 0
    suppressed: int = 0  # route changes not pushed by the hotspot rule
    degraded_rounds: int = 0  # scans skipped under resource pressure
    dropped: int = 0  # pushes to a client whose stream was gone or full
    refused: int = 0  # topic subscriptions refused: the client was at its cap
    without_stream: int = 0  # topic subscriptions refused: the client had no open push stream


class PushStreams(Protocol):
    """The open push streams (``rocketspark.remoting.server.PushHub``)."""

    def is_open(self, client_id: str) -> bool: ...

    def send(self, client_id: str, command: RemotingCommand) -> bool: ...


@dataclass(frozen=True, slots=True)
class Subscribed:
    """The outcome of a subscribe request."""

    client_id: str
    asked: int  # topics the request named
    stream_open: bool  # false: nothing was kept; the client subscribes again once its stream is open
    refused: list[str] = field(default_factory=list)  # not kept: all of them without a stream, else those over the cap
    cap: int = 0  # the client's cap (max_subscriptions_per_client)

    def error(self) -> SubscriptionRefusedError | None:
        """What the client is answered when not every topic was kept: what was refused, why,
        and what to do; None when all were."""
        if not self.stream_open:
            return SubscriptionRefusedError(
                f'route subscription refused: client "{self.client_id}" has no open push stream on this nameserver, '
                f"so none of its {self.asked} topic(s) was kept. Open the push stream first (OPEN_PUSH_STREAM with "
                "this clientId), wait for its first answer, then subscribe again; until then, poll the routes",
                streamOpen=False,
                refused=self.refused,
            )
        if not self.refused:
            return None
        kept = self.asked - len(self.refused)
        return SubscriptionRefusedError(
            f'route subscription partly refused: client "{self.client_id}" is at its cap of {self.cap} route '
            f"subscriptions (the nameserver's max_subscriptions_per_client), so {len(self.refused)} of its "
            f'{self.asked} topic(s) were not kept (e.g. "{self.refused[0]}"; all are named in "refused") and {kept} '
            "were. Poll the refused topics' routes, unsubscribe topics no longer used to make room, or raise "
            "max_subscriptions_per_client",
            streamOpen=True,
            refused=self.refused,
        )


def resource_pressure(max_load_per_cpu: float, max_memory_used: float) -> str | None:
    """Why the machine is too busy to push, or None. Linux figures; elsewhere never busy."""
    try:
        load = os.getloadavg()[0] / (os.cpu_count() or 1)
    except OSError:
        load = 0.0
    if load > max_load_per_cpu:
        return f"load average per CPU {load:.2f} > {max_load_per_cpu}"
    try:
        lines = Path("/proc/meminfo").read_text().splitlines()
        info = dict(line.split(":", 1) for line in lines if ":" in line)
        total = int(info["MemTotal"].split()[0])
        available = int(info["MemAvailable"].split()[0])
        used = 1 - available / total
    except (OSError, KeyError, ValueError, ZeroDivisionError):
        return None
    if used > max_memory_used:
        return f"memory used {used:.0%} > {max_memory_used:.0%}"
    return None


class RouteNotifier:
    def __init__(
        self,
        push: PushStreams,
        *,
        max_load_per_cpu: float,
        max_memory_used: float,
        max_per_client: int,
    ) -> None:
        self.push = push
        self.max_load_per_cpu = max_load_per_cpu
        self.max_memory_used = max_memory_used
        self.max_per_client = max_per_client
        self.subscribers: dict[str, set[str]] = {}  # topic -> client ids
        self.by_client: dict[str, set[str]] = {}  # client id -> topics
        self._capped: set[str] = set()  # clients told of their cap in the log (once per stream)
        self.changed: set[str] = set()
        self.counters = NotifyCounters()
        self._degraded = False

    # -- subscriptions -----------------------------------------------------------------------

    def subscribe(self, client_id: str, topics: Iterable[str]) -> Subscribed:
        """Subscribe a client with an open push stream, up to its cap."""
        wanted = list(dict.fromkeys(topics))
        if not self.push.is_open(client_id):
            self.counters.without_stream += len(wanted)
            return Subscribed(client_id, len(wanted), stream_open=False, refused=wanted, cap=self.max_per_client)
        mine = self.by_client.setdefault(client_id, set())
        refused = []
        for topic in wanted:
            if topic in mine:
                continue
            if len(mine) >= self.max_per_client:
                refused.append(topic)
                continue
            mine.add(topic)
            self.subscribers.setdefault(topic, set()).add(client_id)
        if not mine:
            del self.by_client[client_id]
        if refused:
            self.counters.refused += len(refused)
        if refused and client_id not in self._capped:
            self._capped.add(client_id)
            log.warning(
                "client %s is at its cap of %d route subscriptions (max_subscriptions_per_client); "
                "refused %d topic(s), e.g. %s: it polls them instead",
                client_id,
                self.max_per_client,
                len(refused),
                refused[0],
            )
        return Subscribed(client_id, len(wanted), stream_open=True, refused=refused, cap=self.max_per_client)

    def unsubscribe(self, client_id: str, topics: Iterable[str] | None = None) -> None:
        mine = self.by_client.get(client_id)
        if mine is None:
            return
        for topic in list(mine) if topics is None else topics:
            if topic not in mine:
                continue
            mine.discard(topic)
            clients = self.subscribers.get(topic)
            if clients is not None:
                clients.discard(client_id)
                if not clients:
                    del self.subscribers[topic]
        if not mine:
            del self.by_client[client_id]

    def stream_closed(self, client_id: str) -> None:
        """A client's push stream ended (its owner, the PushHub, says so)."""
        self.unsubscribe(client_id)  # it subscribes again when it reconnects
        self._capped.discard(client_id)

    @property
    def subscription_count(self) -> int:
        return sum(len(topics) for topics in list(self.by_client.values()))  # also read by the metrics' thread

    # -- changes -----------------------------------------------------------------------------

    def mark(self, topics: Iterable[str]) -> None:
        self.changed.update(topics)

    def suppress(self, topics: Iterable[str]) -> None:
        self.counters.suppressed += len(set(topics))

    def scan(self, *, urgent: bool = False) -> int:
        """Push the changed topics to their subscribers; return the pushes sent. ``urgent``
        (a replica group's new master: rare, and producers wait on it) pushes even under
        resource pressure, which pauses only the ordinary rounds."""
        if not self.changed:
            return 0
        pressure = None if urgent else resource_pressure(self.max_load_per_cpu, self.max_memory_used)
        if pressure is not None:
            self.counters.degraded_rounds += 1
            if not self._degraded:
                log.warning("route-change notification paused: %s (routes still served)", pressure)
                self._degraded = True
            return 0
        if self._degraded:
            log.info("route-change notification resumed")
            self._degraded = False
        changed, self.changed = self.changed, set()
        per_client: dict[str, list[str]] = {}
        for topic in sorted(changed):
            for client_id in self.subscribers.get(topic, ()):
                per_client.setdefault(client_id, []).append(topic)
        sent = 0
        for client_id, topics in per_client.items():
            command = RemotingCommand.request(RequestCode.NOTIFY_CLIENT_TOPIC_ROUTE_CHANGED, {"topics": topics})
            if self.push.send(client_id, command):
                sent += 1
                self.counters.topics_notified += len(topics)
            else:
                self.counters.dropped += 1
        self.counters.notifications_sent += sent
        return sent
