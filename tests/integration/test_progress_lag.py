"""A group's lag counts messages, not offset distance: a remap's gap is no backlog."""

from __future__ import annotations

import pytest

from rocketspark import Admin, Consumer, LocalCluster, Message, Producer

pytestmark = pytest.mark.integration


def test_lag_across_a_remap_counts_only_messages() -> None:
    with LocalCluster(brokers=2) as cluster, Admin(cluster.nameserver) as admin:
        admin.create_static_topic("moved", 1, brokers=["broker-a"])
        admin.create_static_topic("empty", 1, brokers=["broker-a"])
        with Producer(cluster.nameserver) as producer:
            for i in range(5):
                producer.send(Message("moved", f"before-{i}".encode(), queue_id=0))
            with Consumer(cluster.nameserver) as consumer:
                consumer.commit_offset("g", "moved", 0, 2)
                consumer.commit_offset("g", "empty", 0, 0)
            admin.remap_static_topic("moved", [0], "broker-b")
            admin.remap_static_topic("empty", [0], "broker-b")
            for i in range(3):
                producer.send(Message("moved", f"after-{i}".encode(), queue_id=0))
        [moved] = admin.consumer_progress("g", "moved")
        assert moved.broker_offset > 10_000  # the new segment starts past the gap
        assert moved.lag == 3 + 3  # three left before the move, three after it
        [empty] = admin.consumer_progress("g", "empty")
        assert empty.lag == 0  # a remap of an empty queue is no backlog
