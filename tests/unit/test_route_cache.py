"""The client's route cache against a scripted nameserver: races, single flight, invalidation."""

from __future__ import annotations

import sys
import threading
import time
import weakref
from typing import Any

import pytest

from rocketspark.client.routes import RouteCache, RouteOptions
from rocketspark.errors import NoRouteInfoError, SystemError_
from rocketspark.protocol.bodies import pack
from rocketspark.protocol.codes import RequestCode, ResponseCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.types import BrokerData, Perm, QueueData, TopicRouteData
from tests.helpers import eventually


def route(topic: str, queues: int = 2, broker: str = "broker-a") -> TopicRouteData:
    return TopicRouteData(
        topic, (BrokerData("C", broker, "127.0.0.1:1"),), (QueueData(broker, queues, queues, Perm.READ_WRITE),)
    )


class FakeNameserver:
    """Stands in for the RemotingClient: answers route queries from ``routes``."""

    default_timeout_ms = 3000

    def __init__(self, routes: dict[str, TopicRouteData] | None = None) -> None:
        self.routes = dict(routes or {})
        self.queries = 0
        self.delay_s = 0.0
        self.broken: BaseException | None = None  # raised by the next query, then cleared
        self._lock = threading.Lock()

    def invoke(
        self, address: str, request: RemotingCommand, timeout_ms: int | None = None, *, peer: str | None = None
    ) -> RemotingCommand:
        with self._lock:
            self.queries += 1
            broken, self.broken = self.broken, None
        if broken is not None:
            raise broken
        time.sleep(self.delay_s)
        if request.code != RequestCode.GET_ROUTEINFO_BY_TOPIC:
            return request.response(ResponseCode.SYSTEM_ERROR, remark=f"cannot serve request {request.code}")
        found = self.routes.get(request.ext["topic"])
        if found is None:
            return request.response(ResponseCode.TOPIC_NOT_EXIST, remark="no such topic")
        return request.response(body=pack(found.to_wire()))

    def invoke_oneway(self, address: str, request: RemotingCommand) -> None:
        pass


class View:
    """A value derived from a route, which a weak reference can watch being let go."""

    def __init__(self, route: TopicRouteData) -> None:
        self.route = route


def cache(fake: FakeNameserver, **options: Any) -> RouteCache:
    return RouteCache(["127.0.0.1:9876"], fake, RouteOptions(route_push=False, **options))  # type: ignore[arg-type]


def test_lookups_of_new_topics_while_expiry_scans_do_not_break_the_scan() -> None:
    fake = FakeNameserver()  # knows no topic: every lookup below adds a topic to what expiry scans
    routes = cache(fake, not_found_ttl_ms=600_000, topic_expiry_ms=600_000)
    old = route("old")
    for i in range(200_000):  # so that each scan takes long enough for lookups to land inside it
        routes.put(f"old-{i}", old)
    stop = threading.Event()

    def look_up() -> None:
        i = 0
        while not stop.is_set():
            with pytest.raises(NoRouteInfoError):
                routes.get(f"new-{i}")
            i += 1

    thread = threading.Thread(target=look_up)
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # switch threads often, so the lookups land inside the scans
    thread.start()
    try:
        for _ in range(30):
            routes.expire()  # "dictionary changed size during iteration" before the fix
    finally:
        sys.setswitchinterval(switch)
        stop.set()
        thread.join()
        routes.close()


def test_a_failing_refresh_round_is_logged_and_the_next_one_runs() -> None:
    fake = FakeNameserver({"t": route("t", queues=2)})
    routes = cache(fake, poll_interval_ms=50)
    try:
        assert routes.get("t").queues[0].write_queue_nums == 2
        fake.broken = RuntimeError("a bug in a refresh round")  # not a RocketSparkError
        fake.routes["t"] = route("t", queues=4)
        eventually(lambda: routes.get("t").queues[0].write_queue_nums == 4, timeout_s=3)
    finally:
        routes.close()


def test_invalidating_a_missing_topic_asks_again_at_once() -> None:
    fake = FakeNameserver()
    routes = cache(fake, not_found_ttl_ms=600_000)
    try:
        with pytest.raises(NoRouteInfoError):
            routes.get("fresh")
        fake.routes["fresh"] = route("fresh")  # e.g. a send through TBW102 created it
        routes.invalidate("fresh")
        assert routes.get("fresh").topic == "fresh"
        assert fake.queries == 2
    finally:
        routes.close()


def test_concurrent_misses_share_one_nameserver_query() -> None:
    fake = FakeNameserver({"busy": route("busy")})
    fake.delay_s = 0.2
    routes = cache(fake)
    answers: list[str] = []
    failures: list[BaseException] = []

    def look_up() -> None:
        try:
            answers.append(routes.get("busy").topic)
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=look_up) for _ in range(8)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not failures and answers == ["busy"] * 8
        assert fake.queries == 1
    finally:
        routes.close()


def test_callers_waiting_on_a_failed_lookup_get_the_error_too() -> None:
    fake = FakeNameserver()
    fake.delay_s = 0.2
    routes = cache(fake)
    errors: list[BaseException] = []

    def look_up() -> None:
        try:
            routes.get("nowhere")
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=look_up) for _ in range(4)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(errors) == 4 and all(isinstance(e, NoRouteInfoError) for e in errors)
        assert len({id(e) for e in errors}) == 4 and fake.queries == 1
    finally:
        routes.close()


def test_derived_values_are_built_once_per_route_and_survive_a_refresh_that_changed_nothing() -> None:
    fake = FakeNameserver({"t": route("t", queues=2)})
    routes = cache(fake)
    builds: list[TopicRouteData] = []

    def count_queues(r: TopicRouteData) -> int:
        builds.append(r)
        return r.queues[0].write_queue_nums

    try:
        assert [routes.derive("t", count_queues) for _ in range(3)] == [2, 2, 2]
        first = routes.get("t")
        routes.refresh("t")  # an equal route: the cached object stays
        assert routes.get("t") is first and routes.derive("t", count_queues) == 2
        assert len(builds) == 1
        fake.routes["t"] = route("t", queues=4)
        routes.refresh("t")
        assert routes.derive("t", count_queues) == 4 and len(builds) == 2
        view = routes.derive("t", View)
        gone = weakref.ref(view)
        del view
        assert gone() is not None  # the cache holds what it derived
        routes.invalidate("t")
        assert gone() is None  # and lets go of it with the route
    finally:
        routes.close()


def test_expiry_drops_what_was_derived_from_a_topic() -> None:
    fake = FakeNameserver({"t": route("t")})
    routes = cache(fake, topic_expiry_ms=50)
    try:
        gone = weakref.ref(routes.derive("t", View))
        assert gone() is not None  # the cache holds what it derived
        eventually(lambda: routes.cached_topics() == [], timeout_s=3)  # the refresh thread expires it
        assert gone() is None and routes.counters.expired == 1
    finally:
        routes.close()


def test_an_error_answer_from_a_nameserver_is_raised_not_returned() -> None:
    routes = cache(FakeNameserver())
    try:
        with pytest.raises(SystemError_, match="cannot serve"):
            routes.namesrv.call(RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO))
        with pytest.raises(SystemError_, match="cannot serve"):
            routes.namesrv.call_at("127.0.0.1:9876", RemotingCommand.request(RequestCode.GET_COUNTERS))
    finally:
        routes.close()
