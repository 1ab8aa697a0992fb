"""Group consumer against a real cluster: a failing handler neither loses messages nor stalls its
queue (retry topic, dead-letter queue);
progress is committed and resumed; membership changes rebalance without waiting for the period."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from rocketspark import Admin, Consumer, GroupConsumer, LocalCluster, Message, Producer
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.types import MessageExt
from tests.helpers import eventually

pytestmark = pytest.mark.integration


def test_a_failed_batch_comes_back_from_the_retry_topic_and_the_queue_keeps_being_read(
    make_cluster: Callable[..., LocalCluster],
) -> None:
    cluster = make_cluster(brokers=1)
    ns = cluster.nameserver
    with Admin(ns) as admin:
        admin.create_topic("flaky-handler", queues=1)
    with Producer(ns) as producer:
        producer.send_batch([Message("flaky-handler", f"m{i}".encode()) for i in range(5)])
    calls: list[list[MessageExt]] = []
    lock = threading.Lock()

    def handle(messages: list[MessageExt]) -> None:
        with lock:
            calls.append(messages)
            if len(calls) <= 2:
                raise RuntimeError("the handler's database is down")

    group = GroupConsumer(
        ns, "flaky", "flaky-handler", handle, start_from="earliest", heartbeat_interval_ms=200, retry_delays_ms=[300]
    )
    with group:

        def delivered() -> set[bytes]:
            with lock:
                return {m.body for batch in calls[2:] for m in batch}

        eventually(lambda: delivered() == {f"m{i}".encode() for i in range(5)}, timeout_s=15)
        with Producer(ns) as producer:
            producer.send(Message("flaky-handler", b"later"))
        eventually(lambda: b"later" in delivered(), timeout_s=10)  # the queue's worker is still alive
        assert group.assignment == {("flaky-handler", 0)} and ("%RETRY%flaky", 0) in group.workers
    with lock:
        retried = [m for batch in calls[1:] for m in batch if m.properties.get("RECONSUME_TIME")]
    assert retried and {m.topic for m in retried} == {"flaky-handler"}  # handed over under their first topic
    assert {m.properties["RETRY_TOPIC"] for m in retried} == {"flaky-handler"}


def test_a_poison_message_ends_in_the_dead_letter_queue_without_holding_up_the_others(
    make_cluster: Callable[..., LocalCluster],
) -> None:
    cluster = make_cluster(brokers=1)
    ns = cluster.nameserver
    with Admin(ns) as admin:
        admin.create_topic("orders-in", queues=1)
    with Producer(ns) as producer:
        sent = producer.send(Message("orders-in", b"poison", keys="bad-1"))
        producer.send_batch([Message("orders-in", f"ok-{i}".encode()) for i in range(3)])
    attempts: list[str] = []
    handled: list[bytes] = []
    lock = threading.Lock()

    def handle(messages: list[MessageExt]) -> None:
        with lock:
            for m in messages:
                if m.body == b"poison":
                    attempts.append(m.properties.get("RECONSUME_TIME", "0"))
                    raise ValueError("cannot parse order")
                handled.append(m.body)

    with GroupConsumer(
        ns,
        "billing",
        "orders-in",
        handle,
        start_from="earliest",
        heartbeat_interval_ms=200,
        max_reconsume_times=3,
        retry_delays_ms=[100, 200, 300],
    ):
        eventually(lambda: handled[:3] == [b"ok-0", b"ok-1", b"ok-2"], timeout_s=10)  # not held up
        with Consumer(ns) as consumer:

            def dead() -> list[MessageExt]:
                try:
                    return consumer.pull("%DLQ%billing", 0, 0, 10).messages
                except Exception:
                    return []

            eventually(lambda: len(dead()) == 1, timeout_s=20)
            [letter] = dead()
    # The first delivery (in a batch with the others, then alone) and 3 retries; its healthy
    # batch-mates were handed over again alone, and are nowhere near the dead-letter queue.
    assert attempts == ["0", "0", "1", "2", "3"]
    assert (letter.body, letter.keys) == (b"poison", ["bad-1"])
    assert letter.properties["RECONSUME_TIME"] == "4" and letter.properties["RETRY_TOPIC"] == "orders-in"
    assert letter.properties["ORIGIN_MESSAGE_ID"] == sent.msg_id


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
            # The first gives its queues up at its next heartbeat; the second takes them at its
            # own next one, once their locks are free.
            eventually(lambda: first.assignment == {("shared", 0), ("shared", 1)}, timeout_s=5)
            eventually(lambda: second.assignment == {("shared", 2), ("shared", 3)}, timeout_s=5)
        finally:
            second.stop()  # leaves at once
        eventually(lambda: first.assignment == {("shared", q) for q in range(4)}, timeout_s=5)
    finally:
        first.stop()


def test_a_member_joining_takes_its_queues_over_where_the_first_stopped_with_nothing_delivered_twice(
    make_cluster: Callable[..., LocalCluster],
) -> None:
    cluster = make_cluster(brokers=1)
    ns = cluster.nameserver
    with Admin(ns) as admin:
        admin.create_topic("handover", queues=4)
    seen: dict[bytes, list[str]] = {}
    lock = threading.Lock()

    def handler(member: str) -> Callable[[list[MessageExt]], None]:
        def handle(messages: list[MessageExt]) -> None:
            with lock:
                for m in messages:
                    seen.setdefault(m.body, []).append(member)

        return handle

    def member(name: str) -> GroupConsumer:
        return GroupConsumer(
            ns,
            "handover-group",
            "handover",
            handler(name),
            start_from="earliest",
            heartbeat_interval_ms=300,
            commit_interval_ms=60_000,  # only the handover commits: a stale committed offset would show
        ).start()

    total = 2000
    with Producer(ns) as producer:
        first = member("a")
        try:
            for i in range(total // 2):
                producer.send(Message("handover", f"m{i}".encode(), queue_id=i % 4))
            eventually(lambda: len(seen) >= total // 4, timeout_s=10)
            second = member("b")
            try:
                # each member owns two queues (which two depends on their random client ids); the rest
                # is sent once they do, so that the second gets some however fast the first reads
                eventually(lambda: len(second.assignment) == len(first.assignment) == 2, timeout_s=30)
                assert second.assignment | first.assignment == {("handover", q) for q in range(4)}
                for i in range(total // 2, total):
                    producer.send(Message("handover", f"m{i}".encode(), queue_id=i % 4))
                eventually(lambda: len(seen) == total, timeout_s=30)
            finally:
                second.stop()
        finally:
            first.stop()
    with lock:
        twice = {body: members for body, members in seen.items() if len(members) > 1}
        by_b = sum(1 for members in seen.values() if "b" in members)
    assert twice == {}, f"{len(twice)} messages delivered twice, e.g. {list(twice.items())[:3]}"
    assert by_b > 0  # the second member did take queues over


def test_a_member_that_lost_a_queue_lock_stops_pulling_it_until_the_lock_is_free(
    make_cluster: Callable[..., LocalCluster],
) -> None:
    """A member the brokers took for gone (here: unregistered behind its back; the intruder
    sorts after it, so the queue stays the member's share) finds, at its
    next rebalance, that another client holds a queue's lock, and stops pulling that queue
    without committing over the other's progress; it takes the queue back once it is free."""
    cluster = make_cluster(brokers=1)
    ns = cluster.nameserver
    broker = cluster.brokers["broker-a"]
    with Admin(ns) as admin:
        admin.create_topic("contested", queues=1)
    member = GroupConsumer(
        ns,
        "contest",
        "contested",
        lambda messages: None,
        heartbeat_interval_ms=200,
        rebalance_interval_ms=200,
        client_id="member",
    ).start()
    try:
        eventually(lambda: member.assignment == {("contested", 0)}, timeout_s=5)
        group = {"consumerGroup": "contest"}
        lock = {**group, "topic": "contested", "queueId": 0}
        with Consumer(ns) as intruder:
            intruder.call(
                broker, RemotingCommand.request(RequestCode.UNREGISTER_CLIENT, {**group, "clientId": "member"})
            )
            intruder.call(broker, RemotingCommand.request(RequestCode.HEART_BEAT, {**group, "clientId": "zz-intruder"}))
            granted = intruder.call(
                broker, RemotingCommand.request(RequestCode.LOCK_BATCH_MQ, {**lock, "clientId": "zz-intruder"})
            )
            assert granted.ext["holder"] == "zz-intruder"
            stop = threading.Event()

            def keep_alive() -> None:  # the intruder stays a member, so its lock holds
                while not stop.wait(0.05):
                    intruder.call(
                        broker, RemotingCommand.request(RequestCode.HEART_BEAT, {**group, "clientId": "zz-intruder"})
                    )

            beating = threading.Thread(target=keep_alive)
            beating.start()
            try:
                eventually(lambda: ("contested", 0) not in member.workers, timeout_s=5)
            finally:
                stop.set()
                beating.join()
            leave = RemotingCommand.request(RequestCode.UNREGISTER_CLIENT, {**group, "clientId": "zz-intruder"})
            intruder.call(broker, leave)  # leaves the group, and its lock with it
        eventually(lambda: member.assignment == {("contested", 0)}, timeout_s=5)
    finally:
        member.stop()
