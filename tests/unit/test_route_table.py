"""The nameserver's route table, as pure logic."""

from __future__ import annotations

import time

from nameserver.routes import RouteTable
from rocketspark.protocol.types import Perm


def registration(name: str, topics: dict[str, int], addr: str = "127.0.0.1:1", perm: int = 6) -> dict[str, object]:
    return {
        "cluster": "C",
        "broker": name,
        "addr": addr,
        "perm": perm,
        "topics": [{"name": t, "r": n, "w": n, "perm": perm} for t, n in topics.items()],
    }


def test_a_route_lists_every_broker_serving_the_topic() -> None:
    table = RouteTable(120_000)
    table.register(registration("a", {"orders": 4}))
    table.register(registration("b", {"orders": 2, "other": 1}, addr="127.0.0.1:2"))
    route = table.route("orders")
    assert route is not None
    assert [(q.broker_name, q.write_queue_nums) for q in route.queues] == [("a", 4), ("b", 2)]
    assert route.address_of("b") == "127.0.0.1:2"
    assert table.route("missing") is None


def test_registration_reports_which_topics_changed() -> None:
    table = RouteTable(120_000)
    assert table.register(registration("a", {"x": 1, "y": 1})) == {"x", "y"}
    assert table.register(registration("a", {"x": 1, "y": 1})) == set()
    assert table.register(registration("a", {"x": 2})) == {"x", "y"}
    assert table.route("y") is None


def test_a_silent_broker_is_dropped_by_the_scan() -> None:
    table = RouteTable(50)
    table.register(registration("a", {"x": 1}))
    assert table.scan_inactive() == {}
    time.sleep(0.08)
    assert table.scan_inactive() == {"a": {"x"}}
    assert table.route("x") is None and table.cluster_info()["clusters"] == {}


def test_wiping_write_permission_keeps_reads() -> None:
    table = RouteTable(120_000)
    table.register(registration("a", {"x": 1}))
    table.register(registration("b", {"y": 1}, addr="127.0.0.1:2"))
    assert table.set_write_perm("a", writable=False) == {"x"}
    route = table.route("x")
    assert route is not None and route.queues[0].perm == Perm.READ
    table.set_write_perm("a", writable=True)
    route = table.route("x")
    assert route is not None and route.queues[0].perm == Perm.READ_WRITE


def test_deleting_a_topic_removes_its_route() -> None:
    table = RouteTable(120_000)
    table.register(registration("a", {"x": 1}))
    assert table.delete_topic("x") and table.route("x") is None
    assert not table.delete_topic("x")


def test_an_incremental_registration_adds_its_topic_and_keeps_the_brokers_others() -> None:
    table = RouteTable(120_000)
    table.register(registration("a", {f"t{i}": 1 for i in range(100)}))
    changed = table.register({**registration("a", {"new": 4}), "incremental": True})
    assert changed == {"new"}
    assert table.route("new") is not None and table.route("t99") is not None
    assert len(table.brokers["a"].topics) == 101
    changed = table.register(registration("a", {"new": 4}))  # a full one still says what is gone
    assert table.route("t99") is None and "t99" in changed
