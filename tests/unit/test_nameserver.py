"""The nameserver's handlers as logic: which route changes notify, and how they are counted."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from nameserver.config import NameServerConfig
from nameserver.server import NameServer
from rocketspark.errors import NameserverNotReadyError
from rocketspark.protocol.bodies import pack, unpack
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.command import RemotingCommand


def _register(ns: NameServer, broker: str, topics: list[str], changed: list[str] | None = None) -> None:
    registration: dict[str, object] = {
        "cluster": "C",
        "broker": broker,
        "addr": f"127.0.0.1:{len(broker)}",
        "topics": [{"name": t, "r": 1, "w": 1, "perm": 6} for t in topics],
    }
    if changed is not None:
        registration["changed"] = changed
    asyncio.run(ns.register_broker(RemotingCommand.request(RequestCode.REGISTER_BROKER, body=pack(registration))))


def test_a_full_registration_notifies_nobody_and_named_topics_notify() -> None:
    ns = NameServer(NameServerConfig(data_dir=""))
    _register(ns, "a", [f"t{i}" for i in range(50)])
    assert ns.notifier.changed == set() and ns.notifier.counters.suppressed == 50
    _register(ns, "a", [f"t{i}" for i in range(52)], changed=["t50", "t51", "t3"])
    assert ns.notifier.changed == {"t50", "t51", "t3"}  # several named topics all notify
    assert ns.notifier.counters.suppressed == 50


def test_expired_brokers_count_each_changed_topic_once() -> None:
    ns = NameServer(NameServerConfig(broker_expired_ms=1, data_dir=""))
    _register(ns, "a", ["shared", "only-a"])
    _register(ns, "bb", ["shared", "only-b"])
    _register(ns, "ccc", ["only-c"])
    suppressed = ns.notifier.counters.suppressed
    time.sleep(0.01)
    ns.expire_brokers()
    assert ns.dropped_brokers == 3 and ns.routes.brokers == {}
    assert ns.notifier.counters.suppressed - suppressed == 4  # shared, only-a, only-b, only-c


def test_wiping_write_permission_notifies_the_brokers_topics_only() -> None:
    ns = NameServer(NameServerConfig(data_dir=""))
    _register(ns, "a", ["x", "y"])
    _register(ns, "bb", ["y", "z"])
    request = RemotingCommand.request(RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "a"})
    response = asyncio.run(ns.wipe_write_perm(request))
    assert response.ext["topics"] == 2 and ns.notifier.changed == {"x", "y"}


def test_a_restarted_nameserver_gives_no_route_until_every_broker_it_served_is_back(tmp_path: Path) -> None:
    """One broker back is not the route: the queues of the other would be missing from it."""
    config = NameServerConfig(data_dir=str(tmp_path))
    first = NameServer(config)
    _register(first, "a", ["orders"])
    _register(first, "b", ["orders"])
    restarted = NameServer(config)
    _register(restarted, "a", ["orders"])
    lookup = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "orders"})
    with pytest.raises(NameserverNotReadyError, match='cannot give all of topic "orders"\'s queues') as raised:
        asyncio.run(restarted.route(lookup))
    assert "has not heard again from b" in raised.value.message
    _register(restarted, "b", ["orders"])
    assert len(unpack(asyncio.run(restarted.route(lookup)).body)["queues"]) == 2
