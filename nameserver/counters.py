"""What a nameserver counts, read out in one place: ``to_wire`` is GET_COUNTERS' answer, and
the metrics' families are made from the same figures (:mod:`nameserver.metrics`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from nameserver.notify import RouteNotifier
from nameserver.routes import RouteTable
from rocketspark.remoting.server import PushHub


class NameServerCounters:
    """The nameserver's counters, given the parts that keep them: requests by code (its
    dispatcher's), the route table, the route-change notifier and its push streams, and
    how many brokers the liveness scan dropped, and where its metrics are served."""

    def __init__(
        self,
        requests: Mapping[int, int],
        routes: RouteTable,
        notifier: RouteNotifier,
        push: PushHub,
        dropped_brokers: Callable[[], int],
        metrics_url: Callable[[], str] = lambda: "",
    ) -> None:
        self.requests = requests
        self.routes = routes
        self.notifier = notifier
        self.push = push
        self.dropped_brokers = dropped_brokers
        self.metrics_url = metrics_url  # its /metrics ("" when off)

    def to_wire(self) -> dict[str, Any]:
        notified = self.notifier.counters
        return {
            "requests": {str(code): n for code, n in sorted(self.requests.items())},
            "brokers": len(self.routes.brokers),
            "topics": len(self.routes.topic_queues),
            "droppedBrokers": self.dropped_brokers(),
            "subscriptions": self.notifier.subscription_count,
            "subscriptionsRefused": notified.refused,
            "subscriptionsWithoutStream": notified.without_stream,
            "pushStreams": self.push.open_count,
            "notificationsSent": notified.notifications_sent,
            "topicsNotified": notified.topics_notified,
            "notificationsSuppressed": notified.suppressed,
            "notifyDegradedRounds": notified.degraded_rounds,
            "notificationsDropped": notified.dropped,
            "metricsUrl": self.metrics_url(),
        }
