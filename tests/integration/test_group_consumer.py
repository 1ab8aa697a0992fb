"""Group consumer against a real cluster: a failing handler neither loses messages nor its queue;
progress is committed and resumed; membership changes rebalance without waiting for the period."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from rocketspark import Admin, Consumer, GroupConsumer, LocalCluster, Message, Producer
from rocketspark.protocol.types import MessageExt
from tests.helpers import eventually

pytestmark = pytest.mark.integration


def test_a_handler_that_raises_gets_the_same_messages_again_and_the_queue_keeps_being_read(
    make_cluster: Callable[..., LocalCluster],
) -> None:
    cluster = make_cluster(brokers=1)
    ns = cluster.nameserver
    with Admin(ns) as admin:
        admin.create_topic("flaky-handler", queues=1)
    with Producer(ns) as producer:
        producer.send_batch([Message("flaky-handler", f"m{i}".encode()) for i in range(5)])
    calls: list[list[bytes]] = []
    lock = threading.Lock()

    def handle(messages: list[MessageExt]) -> None:
        with lock:
            calls.append([m.body for m in messages])
            if len(calls) <= 2:
                raise RuntimeError("the handler's database is down")

    group = GroupConsumer(ns, "flaky", "flaky-handler", handle, start_from="earliest", heartbeat_interval_ms=200)
    with group:

        def delivered() -> set[bytes]:
            with lock:
                return {body for batch in calls[2:] for body in batch}

        eventually(lambda: delivered() == {f"m{i}".encode() for i in range(5)}, timeout_s=10)
        with lock:
            assert calls[0] == calls[1] == calls[2][: len(calls[0])]  # redelivered from the same offset
        with Producer(ns) as producer:
            producer.send(Message("flaky-handler", b"later"))
        eventually(lambda: b"later" in delivered(), timeout_s=10)  # the queue's worker is still alive
        assert group.assignment == {("flaky-handler", 0)}


def test_a_new_member_continues_from_the_committed_offsets_instead_of_reading_again(
    make_cluster: Callable[..., LocalCluster],
) -> None:
    cluster = make_cluster(brokers=1)
    ns = cluster.nameserver
    with Admin(ns) as admin:
        admin.create_topic("resumable", queues=2)
    with Producer(ns) as producer:
        producer.send_batch([Message("resumable", f"old-{i}".encode(), queue_id=i % 2) for i in range(10)])
    seen: list[bytes] = []
    lock = threading.Lock()

    def handle(messages: list[MessageExt]) -> None:
        with lock:
            seen.extend(m.body for m in messages)

    def consumed() -> list[bytes]:
        with lock:
            return sorted(seen)

    old = sorted(f"old-{i}".encode() for i in range(10))
    with GroupConsumer(ns, "resume", "resumable", handle, start_from="earliest", heartbeat_interval_ms=200):
        eventually(lambda: consumed() == old, timeout_s=10)
    with Consumer(ns) as consumer:  # stopping committed where each queue got to
        assert [consumer.committed_offset("resume", "resumable", q) for q in (0, 1)] == [5, 5]
    with Producer(ns) as producer:
        producer.send_batch([Message("resumable", f"new-{i}".encode(), queue_id=i % 2) for i in range(6)])
    with lock:
        seen.clear()
    new = sorted(f"new-{i}".encode() for i in range(6))
    # "earliest" only applies to a queue the group never committed: this member starts at 5.
    with GroupConsumer(ns, "resume", "resumable", handle, start_from="earliest", heartbeat_interval_ms=200):
        eventually(lambda: consumed() == new, timeout_s=10)  # an old message read again would never leave
    with Consumer(ns) as consumer:
        assert [consumer.committed_offset("resume", "resumable", q) for q in (0, 1)] == [8, 8]


def test_a_member_joining_or_leaving_rebalances_at_the_next_heartbeat_not_the_next_period(
    make_cluster: Callable[..., LocalCluster],
) -> None:
    cluster = make_cluster(brokers=1)
    ns = cluster.nameserver
    with Admin(ns) as admin:
        admin.create_topic("shared", queues=4)

    def member(client_id: str) -> GroupConsumer:
        # The periodic rebalance is a minute away: only the membership change can move queues.
        return GroupConsumer(
            ns,
            "rebalancers",
            "shared",
            lambda messages: None,
            rebalance_interval_ms=60_000,
            heartbeat_interval_ms=1_000,
            client_id=client_id,
        ).start()

    first = member("member-a")
    try:
        assert first.assignment == {("shared", q) for q in range(4)}  # alone
        second = member("member-b")  # its first heartbeat and rebalance happen in start()
        try:
            assert second.assignment == {("shared", 2), ("shared", 3)}
            eventually(lambda: first.assignment == {("shared", 0), ("shared", 1)}, timeout_s=5)
        finally:
            second.stop()  # leaves at once
        eventually(lambda: first.assignment == {("shared", q) for q in range(4)}, timeout_s=5)
    finally:
        first.stop()
