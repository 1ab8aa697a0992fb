"""The nameserver's route notifier: who hears of what, and when it holds back."""

from __future__ import annotations

from nameserver.notify import RouteNotifier
from rocketspark.remoting.server import PushHub


def notifier(**kw: float) -> RouteNotifier:
    return RouteNotifier(PushHub(), max_load_per_cpu=kw.get("load", 1000.0), max_memory_used=kw.get("memory", 1.0))


def test_only_subscribers_of_a_changed_topic_are_pushed() -> None:
    n = notifier()
    n.subscribe("c1", ["a", "b"])
    n.subscribe("c2", ["b"])
    n.mark(["a"])
    assert n.scan() == 0  # no stream open: counted as dropped, not sent
    assert n.counters.dropped == 1 and n.changed == set()
    n.mark(["z"])
    n.scan()
    assert n.counters.dropped == 1  # nobody subscribed to z


def test_resource_pressure_pauses_pushes_and_keeps_the_changes() -> None:
    n = notifier(load=-1.0)
    n.subscribe("c1", ["a"])
    n.mark(["a"])
    assert n.scan() == 0 and n.scan() == 0
    assert n.counters.degraded_rounds == 2 and n.changed == {"a"}


def test_a_closed_stream_forgets_its_subscriptions() -> None:
    n = notifier()
    n.subscribe("c1", ["a", "b"])
    n.subscribe("c2", ["a"])
    assert n.subscription_count == 3
    n._stream_closed("c1")
    assert n.subscription_count == 1 and n.subscribers == {"a": {"c2"}}
    n.unsubscribe("c2", ["a"])
    assert n.subscribers == {}


def test_suppressed_changes_are_counted() -> None:
    n = notifier()
    n.suppress({"a", "b", "c"})
    assert n.counters.suppressed == 3
