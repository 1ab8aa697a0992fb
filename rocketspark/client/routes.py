"""Topic routes on the client: ask a nameserver, cache the answer, refresh it every 30 s.

The cache is shared by everything one client object does. ``get`` answers from the cache and
asks a nameserver only for a topic it has not seen (or whose entry was invalidated); a
background thread refreshes every cached topic every ``poll_interval_ms`` (RocketMQ's
``pollNameServerInterval``). One nameserver, picked at random, is used until it fails; the
others are tried in turn.
"""

from __future__ import annotations

import logging
import os
import random
import threading
from dataclasses import dataclass

from rocketspark.errors import (
    ConnectError,
    NoNameServerError,
    NoRouteInfoError,
    RequestTimeoutError,
    RocketSparkError,
    TopicNotExistError,
)
from rocketspark.protocol.codec import unpack
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.types import Perm, TopicRouteData
from rocketspark.remoting.client import RemotingClient, check, parse_address

log = logging.getLogger(__name__)

ENV_NAMESRV = "ROCKETSPARK_NAMESRV"
AUTO_CREATE_TOPIC = "TBW102"


def resolve_nameservers(nameserver: str | list[str] | tuple[str, ...] | None) -> list[str]:
    """Addresses from the argument, else ``ROCKETSPARK_NAMESRV``; none at all is an error."""
    if nameserver is None:
        nameserver = os.environ.get(ENV_NAMESRV, "")
    if isinstance(nameserver, str):
        nameserver = nameserver.replace(";", ",").split(",")
    addresses = [a.strip() for a in nameserver if a and a.strip()]
    if not addresses:
        raise NoNameServerError(
            f"No name server address, please set it: pass nameserver='host:port' or set the {ENV_NAMESRV} "
            "environment variable (e.g. 127.0.0.1:9876)"
        )
    for address in addresses:
        parse_address(address)
    return addresses


@dataclass(frozen=True, slots=True)
class QueueRef:
    """One readable or writable queue of a route: a broker's physical queue."""

    broker_name: str
    queue_id: int


def read_queues(route: TopicRouteData) -> list[QueueRef]:
    """The topic's queues in a stable order (broker name, then queue id): its logical view."""
    return [
        QueueRef(q.broker_name, i)
        for q in sorted(route.queues, key=lambda q: q.broker_name)
        if q.perm & Perm.READ and route.address_of(q.broker_name)
        for i in range(q.read_queue_nums)
    ]


def write_queues(route: TopicRouteData, *, writable_only: bool = True) -> list[QueueRef]:
    """The topic's write queues in view order; with ``writable_only=False`` also those of
    brokers whose write permission is wiped, so that indexes into the list stay stable."""
    return [
        QueueRef(q.broker_name, i)
        for q in sorted(route.queues, key=lambda q: q.broker_name)
        if (q.perm & Perm.WRITE or not writable_only) and route.address_of(q.broker_name)
        for i in range(q.write_queue_nums)
    ]


class RouteCache:
    def __init__(self, nameservers: list[str], remoting: RemotingClient, *, poll_interval_ms: int = 30_000) -> None:
        self.nameservers = list(nameservers)
        self.remoting = remoting
        self.poll_interval_ms = poll_interval_ms
        self._routes: dict[str, TopicRouteData] = {}
        self._lock = threading.Lock()
        self._current = random.randrange(len(self.nameservers))
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.queries = 0  # route queries sent to nameservers (tests and operators read it)

    # -- nameserver calls ------------------------------------------------------------------------

    @property
    def current_nameserver(self) -> str:
        return self.nameservers[self._current % len(self.nameservers)]

    def call_nameserver(self, request: RemotingCommand, timeout_ms: int | None = None) -> RemotingCommand:
        """Send to the sticky nameserver, moving to the next one when it cannot be reached."""
        errors: list[str] = []
        for attempt in range(len(self.nameservers)):
            address = self.nameservers[(self._current + attempt) % len(self.nameservers)]
            try:
                response = self.remoting.invoke(address, request, timeout_ms, peer="nameserver")
            except (ConnectError, RequestTimeoutError) as exc:
                errors.append(exc.message)
                continue
            self._current = (self._current + attempt) % len(self.nameservers)
            return response
        raise ConnectError("no nameserver answered: " + "; ".join(errors), nameservers=self.nameservers)

    def fetch(self, topic: str) -> TopicRouteData:
        """Ask a nameserver for a route now; TopicNotExistError when it has none."""
        self.queries += 1
        response = check(
            self.call_nameserver(RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}))
        )
        return TopicRouteData.from_wire(unpack(response.body))

    # -- cache -----------------------------------------------------------------------------------

    def get(self, topic: str) -> TopicRouteData:
        """The cached route, fetched on first use. Raises NoRouteInfoError with the reason."""
        route = self._routes.get(topic)
        if route is not None:
            return route
        try:
            route = self.fetch(topic)
        except TopicNotExistError:
            raise NoRouteInfoError(
                f'No route info of this topic "{topic}": the nameserver at {self.current_nameserver} knows no such '
                f"topic. Create it with `rocketspark admin create-topic {topic}`",
                topic=topic,
            ) from None
        except ConnectError as exc:
            raise NoRouteInfoError(
                f'No route info of this topic "{topic}": {exc.message}. Is the nameserver running?', topic=topic
            ) from None
        self.put(topic, route)
        return route

    def put(self, topic: str, route: TopicRouteData) -> None:
        with self._lock:
            self._routes[topic] = route
        self._ensure_refresher()

    def invalidate(self, topic: str) -> None:
        with self._lock:
            self._routes.pop(topic, None)

    def refresh(self, topic: str) -> TopicRouteData | None:
        """Re-fetch one route; keep the old one if the nameserver cannot be reached."""
        try:
            route = self.fetch(topic)
        except TopicNotExistError:
            self.invalidate(topic)
            return None
        except RocketSparkError as exc:
            log.debug("route refresh of %s failed: %s", topic, exc)
            return self._routes.get(topic)
        self.put(topic, route)
        return route

    def cached_topics(self) -> list[str]:
        return list(self._routes)

    # -- background refresh ------------------------------------------------------------------------

    def _ensure_refresher(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            with self._lock:
                if self._thread is None or not self._thread.is_alive():
                    self._thread = threading.Thread(target=self._refresh_loop, name="route-refresh", daemon=True)
                    self._thread.start()

    def _refresh_loop(self) -> None:
        while not self._stop.wait(self.poll_interval_ms / 1000):
            for topic in self.cached_topics():
                if self._stop.is_set():
                    return
                self.refresh(topic)

    def close(self) -> None:
        self._stop.set()
