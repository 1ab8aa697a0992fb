"""Admin operations that must not cost more requests than they need."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from rocketspark import Admin, LocalCluster
from rocketspark.protocol.codes import RequestCode

pytestmark = pytest.mark.integration


def test_draining_a_broker_reads_only_its_static_topics_from_the_other_brokers(
    make_cluster: Callable[..., LocalCluster],
) -> None:
    cluster = make_cluster(brokers=2)
    ns = cluster.nameserver
    with Admin(ns) as admin:
        for i in range(5):
            admin.create_topic(f"plain-{i}", queues=2)
        admin.create_static_topic("ledger", 4, brokers=["broker-a", "broker-b"])

        def config_reads(broker: str) -> int:
            return int(admin.broker_counters(broker)["requests"].get(str(int(RequestCode.GET_TOPIC_CONFIG)), 0))

        before = config_reads("broker-a")
        results = admin.drain_broker("broker-b")
        assert [r.topic for r in results] == ["ledger"] and len(results[0].moved) == 2
        # broker-a was asked about the static topic only, not about every normal topic of broker-b
        assert config_reads("broker-a") - before == 1
