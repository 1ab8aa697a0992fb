"""Topic routes on the client: ask a nameserver, cache the answer, refresh it every 30 s.

The cache is shared by everything one client object does. ``get`` answers from the cache and
asks a nameserver only for a topic it has not seen (or whose entry was invalidated); a
background thread refreshes every cached topic every ``poll_interval_ms`` (RocketMQ's
``pollNameServerInterval``). One nameserver, picked at random, is used until it fails; the
others are tried in turn.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypedDict, TypeVar, cast

from rocketspark.client.daemon import DaemonThread
from rocketspark.client.nameservers import Nameservers
from rocketspark.client.route_push import RouteSubscriber
from rocketspark.errors import (
    ConnectError,
    InvalidParameterError,
    NameserverNotReadyError,
    NoRouteInfoError,
    RocketSparkError,
    TopicNotExistError,
)
from rocketspark.protocol.bodies import unpack
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.types import Perm, QueueData, TopicRouteData
from rocketspark.remoting.client import RemotingClient

log = logging.getLogger(__name__)

T = TypeVar("T")


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
        if q.perm & Perm.READ and route.read_address_of(q.broker_name)
        for i in range(q.read_queue_nums)
    ]


def write_queues(route: TopicRouteData, *, writable_only: bool = True) -> list[QueueRef]:
    """The topic's write queues in view order. With ``writable_only=False`` also those of
    brokers whose write permission is wiped and of replica groups electing a master (no
    address right now), so that indexes into the list stay stable: a key keeps its queue."""

    def included(q: QueueData) -> bool:
        address = route.address_of(q.broker_name)
        return bool(q.perm & Perm.WRITE and address) if writable_only else address is not None

    return [
        QueueRef(q.broker_name, i)
        for q in sorted(route.queues, key=lambda q: q.broker_name)
        if included(q)
        for i in range(q.write_queue_nums)
    ]


class RouteKwargs(TypedDict, total=False):
    """The route-cache keywords ``Producer``, ``Consumer`` and ``Admin`` take (see RouteOptions)."""

    poll_interval_ms: int
    topic_expiry_ms: int
    not_found_ttl_ms: int
    route_push: bool


@dataclass(frozen=True, slots=True)
class RouteOptions:
    """How a client keeps its routes fresh (the RouteCache docstring explains each)."""

    poll_interval_ms: int = 30_000  # RocketMQ's pollNameServerInterval
    topic_expiry_ms: int = 300_000
    not_found_ttl_ms: int = 5_000
    route_push: bool = True

    def __post_init__(self) -> None:
        for name in ("poll_interval_ms", "topic_expiry_ms"):
            if getattr(self, name) <= 0:
                raise InvalidParameterError(
                    f"{name} must be a positive number of milliseconds, not {getattr(self, name)}"
                )
        if self.not_found_ttl_ms < 0:
            raise InvalidParameterError(
                f"not_found_ttl_ms must be 0 (no negative cache) or more milliseconds, not {self.not_found_ttl_ms}"
            )

    @classmethod
    def of(cls, client: str, options: RouteKwargs) -> RouteOptions:
        """From a client's keyword arguments; an unknown one is named, with the known ones."""
        unknown = sorted(set(options) - set(RouteKwargs.__annotations__))
        if unknown:
            raise TypeError(
                f"{client}() got unexpected keyword argument(s) {', '.join(unknown)}; the route options are "
                f"{', '.join(RouteKwargs.__annotations__)}"
            )
        return cls(**options)


@dataclass
class RouteCounters:
    """What the cache did; tests and operators read it."""

    queries: int = 0  # route queries sent to nameservers
    negative_hits: int = 0  # lookups answered "no such topic" from the cache
    notifications: int = 0  # route-change notifications received
    expired: int = 0  # topics dropped after going unused
    subscriptions_refused: int = 0  # topics the nameserver would not push (its per-client cap): polled


class _Flight:
    """One nameserver lookup that several callers wait for."""

    __slots__ = ("done", "error", "route")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.route: TopicRouteData | None = None
        self.error: BaseException | None = None

    def wait(self, topic: str) -> TopicRouteData:
        self.done.wait()
        if self.route is not None:
            return self.route
        error = self.error
        if isinstance(error, RocketSparkError):  # a copy: each waiter raises its own exception
            raise type(error)(error.message, **error.details) from None
        raise NoRouteInfoError(f'No route info of this topic "{topic}": the lookup failed ({error!r})', topic=topic)


class RouteCache:
    """Routes by topic, kept fresh four ways (seed 000):

    - every ``poll_interval_ms`` (30 s) each cached topic is re-read;
    - a nameserver pushes the names of changed topics (``RouteSubscriber``) and they are
      re-read at once;
    - a topic unused for ``topic_expiry_ms`` (5 min) is dropped and unsubscribed, so zombie
      topics cost nothing;
    - "no such topic" is remembered for ``not_found_ttl_ms``, so a hot loop on a missing topic
      costs one query per TTL, and forgotten at once when the topic appears (it is
      subscribed to as well).
    """

    def __init__(
        self,
        nameservers: str | list[str] | tuple[str, ...] | None,
        remoting: RemotingClient,
        options: RouteOptions | None = None,
    ) -> None:
        self.namesrv = Nameservers(nameservers, remoting, on_change=self._nameserver_changed)
        self.remoting = remoting
        self.options = options = options or RouteOptions()
        self.counters = RouteCounters()
        self._routes: dict[str, TopicRouteData] = {}
        self._missing: dict[str, float] = {}  # topic -> monotonic time the negative entry ends
        self._missing_said: dict[str, str] = {}  # topic -> which nameservers said it is missing
        self._used: dict[str, float] = {}  # topic -> monotonic time of last use
        self._flights: dict[str, _Flight] = {}  # topic -> the nameserver lookup in progress
        # topic -> build function -> (the route it was built from, the value): see derive()
        self._derived: dict[str, dict[Callable[[TopicRouteData], object], tuple[TopicRouteData, object]]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._refresher = DaemonThread(self._refresh_loop, "route-refresh")
        self.subscriber: RouteSubscriber | None = None
        if options.route_push:
            namesrv = self.namesrv
            self.subscriber = RouteSubscriber(
                remoting, lambda: namesrv.current, self.notified, self.counters, options.poll_interval_ms
            )

    # -- nameserver calls ------------------------------------------------------------------------

    def _nameserver_changed(self) -> None:
        if self.subscriber is not None:
            self.subscriber.nameserver_changed()  # subscriptions move to the new sticky one

    def fetch(self, topic: str) -> TopicRouteData:
        """Ask a nameserver for a route now; TopicNotExistError when it has none."""
        self.counters.queries += 1
        response = self.namesrv.lookup(RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}))
        return TopicRouteData.from_wire(unpack(response.body))

    # -- cache -----------------------------------------------------------------------------------

    def _not_found(self, topic: str) -> NoRouteInfoError:
        said = self._missing_said.get(topic) or f"no nameserver ({', '.join(self.namesrv.addresses)}) knows it"
        return NoRouteInfoError(
            f'No route info of this topic "{topic}": {said}. Create it with `rocketspark admin create-topic {topic}`',
            topic=topic,
        )

    def get(self, topic: str) -> TopicRouteData:
        """The cached route, fetched on first use. Raises NoRouteInfoError with the reason.

        One lookup per topic is in flight at a time: callers that miss while it runs wait for
        its answer instead of each asking a nameserver (single flight)."""
        now = time.monotonic()
        with self._lock:  # the refresh thread's expiry scans these dicts
            self._used[topic] = now
            route = self._routes.get(topic)
            if route is not None:
                return route
            until = self._missing.get(topic)
            if until is not None and now < until:
                self.counters.negative_hits += 1
                raise self._not_found(topic)
            flight = self._flights.get(topic)
            if flight is not None:
                leading = False
            else:
                leading = True
                flight = self._flights[topic] = _Flight()
        if not leading:
            return flight.wait(topic)
        try:
            flight.route = self._load(topic)
            return flight.route
        except BaseException as exc:
            flight.error = exc
            raise
        finally:
            with self._lock:
                self._flights.pop(topic, None)
            flight.done.set()

    def _load(self, topic: str) -> TopicRouteData:
        try:
            route = self.fetch(topic)
        except TopicNotExistError as missing:  # every nameserver reached said so (Nameservers.lookup)
            with self._lock:
                self._missing[topic] = time.monotonic() + self.options.not_found_ttl_ms / 1000
                self._missing_said[topic] = missing.message
            self._watch(topic)  # hear at once when it is created
            self._refresher.ensure()
            raise self._not_found(topic) from None
        except (ConnectError, NameserverNotReadyError) as exc:  # kept as they are: the topic may well exist
            raise type(exc)(f'cannot look up the route of topic "{topic}": {exc.message}', topic=topic) from None
        return self.put(topic, route)

    def put(self, topic: str, route: TopicRouteData) -> TopicRouteData:
        """Cache a route; returns the cached object. A route equal to the cached one (the
        usual answer of a refresh) keeps the cached object, so what ``derive`` computed from
        it stays valid."""
        with self._lock:
            old = self._routes.get(topic)
            if old is not None and old == route:
                route = old
            else:
                self._routes[topic] = route
                self._derived.pop(topic, None)
            self._missing.pop(topic, None)
            self._missing_said.pop(topic, None)
            self._used.setdefault(topic, time.monotonic())
        if old is None:
            self._watch(topic)
        self._refresher.ensure()
        return route

    def derive(self, topic: str, build: Callable[[TopicRouteData], T]) -> T:
        """``build(route)`` for the topic's route, computed once per cached route object (the
        logical view, the producer's writable queues): hot paths ask for it on every call.
        ``build`` must depend on the route only; it is the key, so pass the same function."""
        route = self.get(topic)
        known = self._derived.get(topic)
        if known is not None:
            hit = known.get(build)
            if hit is not None and hit[0] is route:
                return cast(T, hit[1])
        value = build(route)
        with self._lock:
            if self._routes.get(topic) is route:  # a dropped or replaced route leaves nothing behind
                self._derived.setdefault(topic, {})[build] = (route, value)
        return value

    def _watch(self, topic: str) -> None:
        if self.subscriber is not None:
            self.subscriber.subscribe([topic])

    def invalidate(self, topic: str) -> None:
        """Forget what is known of the topic, found or missing: the next ``get`` asks a
        nameserver (e.g. a send through the auto-create template has just created it)."""
        with self._lock:
            self._routes.pop(topic, None)
            self._missing.pop(topic, None)
            self._missing_said.pop(topic, None)
            self._derived.pop(topic, None)

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
        return self.put(topic, route)

    def notified(self, topics: list[str]) -> None:
        """A nameserver says these routes changed: forget "missing", re-read the cached ones."""
        self.counters.notifications += 1
        for topic in topics:
            with self._lock:
                self._missing.pop(topic, None)
                self._missing_said.pop(topic, None)
            if topic in self._routes:
                self.refresh(topic)

    def has_route(self, topic: str) -> bool:
        return topic in self._routes

    def cached(self, topic: str) -> TopicRouteData | None:
        """The route held for ``topic`` now, or None. Unlike ``get`` it asks no nameserver and
        is no use of the topic: a look at what the cache holds (has a push arrived?) leaves
        the cache as it was."""
        with self._lock:
            return self._routes.get(topic)

    def cached_topics(self) -> list[str]:
        with self._lock:
            return list(self._routes)

    def missing_topics(self) -> list[str]:
        with self._lock:
            return list(self._missing)

    # -- background refresh and expiry ----------------------------------------------------------------

    def _refresh_loop(self) -> None:
        """Expire every tick, refresh every poll interval. A round that fails is logged and the
        next one runs: if this thread died, routes would silently stop refreshing and expiring."""
        tick = min(self.options.poll_interval_ms, max(self.options.topic_expiry_ms // 4, 50), 1000) / 1000
        next_poll = time.monotonic() + self.options.poll_interval_ms / 1000
        while not self._stop.wait(tick):
            try:
                self.expire()
                if time.monotonic() < next_poll:
                    continue
                next_poll = time.monotonic() + self.options.poll_interval_ms / 1000
                for topic in self.cached_topics():
                    if self._stop.is_set():
                        return
                    self.refresh(topic)
                if self.subscriber is not None:
                    self.subscriber.resubscribe()  # asks again for subscriptions a nameserver refused
            except Exception:
                log.exception("route refresh round failed; the next one runs in %.1f s", tick)

    def expire(self) -> list[str]:
        """Drop topics unused for ``topic_expiry_ms`` and stop watching them."""
        cutoff = time.monotonic() - self.options.topic_expiry_ms / 1000
        now = time.monotonic()
        with self._lock:
            gone = [t for t, used in self._used.items() if used < cutoff]
            for topic in gone:
                self._routes.pop(topic, None)
                self._missing.pop(topic, None)
                self._missing_said.pop(topic, None)
                self._used.pop(topic, None)
                self._derived.pop(topic, None)
            for topic in [t for t, until in self._missing.items() if until < now and t not in self._used]:
                self._missing.pop(topic, None)
                self._missing_said.pop(topic, None)
        if gone:
            self.counters.expired += len(gone)
            if self.subscriber is not None:
                self.subscriber.unsubscribe(gone)
        return gone

    def close(self) -> None:
        self._stop.set()
        if self.subscriber is not None:
            self.subscriber.close()
