"""A restarted nameserver says "not ready", never "no such topic", and a client asks the others
before it concludes a topic is missing."""

from __future__ import annotations

from pathlib import Path

import pytest

from nameserver.readiness import Readiness
from rocketspark.client.nameservers import Nameservers
from rocketspark.client.routes import RouteCache, RouteOptions
from rocketspark.errors import NameserverNotReadyError, NoRouteInfoError
from rocketspark.protocol.bodies import pack
from rocketspark.protocol.codes import RequestCode, ResponseCode
from rocketspark.protocol.command import RemotingCommand
from tests.unit.test_route_cache import route

A, B, C = "10.0.0.1:9876", "10.0.0.2:9876", "10.0.0.3:9876"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_first_start_is_ready_at_once_and_a_restart_waits_for_the_brokers_it_served(tmp_path: Path) -> None:
    clock = Clock()
    first = Readiness(tmp_path, 10_000, clock)
    assert first.ready
    first.serving(["broker-a", "broker-b"])

    restarted = Readiness(tmp_path, 10_000, clock)
    assert not restarted.ready and restarted.waiting_for() == ["broker-a", "broker-b"]
    restarted.registered("broker-b")
    restarted.serving(["broker-b"])  # a crash now must still wait for broker-a next time
    assert Readiness(tmp_path, 10_000, clock).waiting_for() == ["broker-a", "broker-b"]
    restarted.registered("broker-a")
    assert restarted.ready


def test_a_broker_that_never_returns_holds_readiness_for_startup_wait_only(tmp_path: Path) -> None:
    clock = Clock()
    Readiness(tmp_path, 5_000, clock).serving(["gone"])
    restarted = Readiness(tmp_path, 5_000, clock)
    clock.now += 4.9
    assert not restarted.ready and restarted.ready_in_s() == pytest.approx(0.1)
    clock.now += 0.2
    assert restarted.ready and restarted.waiting_for() == []


def test_a_damaged_list_waits_the_whole_window(tmp_path: Path) -> None:
    (tmp_path / "known-brokers.json").write_text("{not json")
    clock = Clock()
    restarted = Readiness(tmp_path, 5_000, clock)
    assert not restarted.ready
    clock.now += 5
    assert restarted.ready


class ScriptedNameservers:
    """Stands in for the RemotingClient: each address answers a route query its own way."""

    default_timeout_ms = 600

    def __init__(self, answers: dict[str, str]) -> None:
        self.answers = answers  # address -> "route" | "missing" | "not ready"
        self.asked: list[str] = []

    def invoke(
        self, address: str, request: RemotingCommand, timeout_ms: int | None = None, *, peer: str | None = None
    ) -> RemotingCommand:
        self.asked.append(address)
        answer = self.answers[address]
        if answer == "route":
            return request.response(body=pack(route(request.ext["topic"]).to_wire()))
        if answer == "missing":
            return request.response(ResponseCode.TOPIC_NOT_EXIST, remark="no such topic")
        return request.response(ResponseCode.NAMESERVER_NOT_READY, remark=f"{address} restarted a moment ago")

    def invoke_oneway(self, address: str, request: RemotingCommand) -> None:
        pass


def lookup(fake: ScriptedNameservers, topic: str = "orders") -> RemotingCommand:
    nameservers = Nameservers([A, B, C], fake)  # type: ignore[arg-type]
    return nameservers.lookup(RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}))


@pytest.mark.parametrize("others", ["missing", "not ready"])
def test_nameservers_that_do_not_know_a_topic_are_not_the_last_word(others: str) -> None:
    for _ in range(10):  # whichever one the client starts from
        fake = ScriptedNameservers({A: others, B: others, C: "route"})
        assert lookup(fake).code == ResponseCode.SUCCESS
        assert fake.asked[-1] == C and len(set(fake.asked)) == len(fake.asked)


def test_a_topic_is_missing_only_when_every_nameserver_reached_says_so() -> None:
    fake = ScriptedNameservers({A: "missing", B: "not ready", C: "missing"})
    cache = RouteCache([A, B, C], fake, RouteOptions(route_push=False))  # type: ignore[arg-type]
    with pytest.raises(
        NoRouteInfoError, match=rf"the nameservers at {A}, {C} know no such topic \(1 other was not ready"
    ):
        cache.get("orders")
    assert sorted(fake.asked) == [A, B, C]


def test_while_only_not_ready_nameservers_answer_the_lookup_waits_then_says_not_ready() -> None:
    fake = ScriptedNameservers({A: "not ready", B: "not ready", C: "not ready"})
    cache = RouteCache([A, B, C], fake, RouteOptions(route_push=False))  # type: ignore[arg-type]
    with pytest.raises(NameserverNotReadyError, match="restarted a moment ago") as raised:
        cache.get("orders")
    assert not isinstance(raised.value, NoRouteInfoError)  # nothing may conclude the topic is missing
    assert len(fake.asked) > 3  # it asked again before the deadline
    assert cache.missing_topics() == []  # and remembered nothing as missing
    fake.answers[B] = "route"
    assert cache.get("orders").topic == "orders"
