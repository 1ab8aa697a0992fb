"""Broker death: producers route around it, the nameserver drops it, a group loses nothing."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from rocketspark import Admin, GroupConsumer, LocalCluster, Message, Producer, RocketSparkError
from rocketspark.protocol.types import MessageExt
from tests.helpers import eventually

pytestmark = [pytest.mark.integration, pytest.mark.slow]
FAST_NAMESERVER = {"scan_interval_ms": 100, "broker_expired_ms": 1500}
FAST_BROKER = {"register_interval_ms": 300, "consumer_expired_ms": 2000, "offset_flush_interval_ms": 200}


def test_producers_stop_choosing_a_dead_broker_within_one_send_timeout(
    make_cluster: Callable[..., LocalCluster],
) -> None:
    cluster = make_cluster(brokers=2, nameserver_config=FAST_NAMESERVER, broker_config=FAST_BROKER)
    ns = cluster.nameserver
    with Admin(ns) as admin:
        admin.create_topic("resilient", queues=2)
    with Producer(ns, send_latency_fault_enable=True, send_timeout_ms=1000) as producer, Admin(ns) as admin:
        assert {producer.send(Message("resilient", b"x")).broker_name for _ in range(8)} == {"broker-a", "broker-b"}
        assert producer.routes.subscriber is not None and producer.routes.subscriber.connected.wait(10)
        time.sleep(1.2)  # a notify round: the creation of the topic is announced before we count
        counters_before, notified_before = admin.nameserver_counters(), producer.routes.counters.notifications
        cluster.kill_broker("broker-b")
        started = time.monotonic()
        for _ in range(4):  # round robin reaches broker-b among these; that send retries on broker-a
            assert producer.send(Message("resilient", b"after")).broker_name == "broker-a"
        assert time.monotonic() - started < 1.5  # the dead broker cost at most one send timeout
        assert producer.fault is not None and not producer.fault.available("broker-b")
        timings = []
        for _ in range(50):
            t = time.monotonic()
            assert producer.send(Message("resilient", b"y")).broker_name == "broker-a"
            timings.append(time.monotonic() - t)
        assert max(timings) < 0.5  # no send waits on the dead broker any more
        eventually(lambda: list(admin.cluster_list()["brokers"]) == ["broker-a"], timeout_s=5)
        # A whole broker dying notifies nobody (the hotspot rule), though the producer
        # subscribes the topic whose route just lost half its queues: the change is suppressed.
        time.sleep(1.2)  # a notify round after the drop
        counters = admin.nameserver_counters()
        assert counters["notificationsSent"] == counters_before["notificationsSent"]
        assert counters["notificationsSuppressed"] > counters_before["notificationsSuppressed"]
        assert producer.routes.counters.notifications == notified_before


def test_a_send_reaching_a_hung_broker_is_retried_on_the_other_within_its_timeout(
    make_cluster: Callable[..., LocalCluster],
) -> None:
    cluster = make_cluster(brokers=2)
    ns = cluster.nameserver
    with Admin(ns) as admin:
        admin.create_topic("hung", queues=2)
    with Producer(ns, send_timeout_ms=3000) as producer:  # no latency table: only the retry avoids it
        assert {producer.send(Message("hung", b"x")).broker_name for _ in range(8)} == {"broker-a", "broker-b"}
        pid = cluster.broker_pid("broker-b")
        assert pid is not None
        os.kill(pid, signal.SIGSTOP)  # alive and connected, but never answers
        try:
            took = []
            for _ in range(4):  # round robin reaches broker-b's queues among these
                started = time.monotonic()
                assert producer.send(Message("hung", b"y")).broker_name == "broker-a"
                took.append(time.monotonic() - started)
        finally:
            os.kill(pid, signal.SIGCONT)
        # a send that went to broker-b waited one attempt's share (1 s of 3 s), then broker-a took it
        assert sum(t > 0.9 for t in took) >= 1
        assert max(took) < 2.0


def test_a_hung_broker_costs_one_attempt_and_is_then_avoided(
    make_cluster: Callable[..., LocalCluster],
) -> None:
    cluster = make_cluster(brokers=2)
    ns = cluster.nameserver
    with Admin(ns) as admin:
        admin.create_topic("hung", queues=2)
    with Producer(ns, send_latency_fault_enable=True, send_timeout_ms=1500) as producer:
        assert {producer.send(Message("hung", b"x")).broker_name for _ in range(8)} == {"broker-a", "broker-b"}
        pid = cluster.broker_pid("broker-b")
        assert pid is not None
        os.kill(pid, signal.SIGSTOP)
        try:
            took = []
            for _ in range(8):  # round robin reaches broker-b's queues among these
                started = time.monotonic()
                assert producer.send(Message("hung", b"y")).broker_name == "broker-a"
                took.append(time.monotonic() - started)
            # the timed-out attempt marked broker-b as the worst latency: no later send waits on it
            assert producer.fault is not None and not producer.fault.available("broker-b")
        finally:
            os.kill(pid, signal.SIGCONT)
        assert sum(t > 0.4 for t in took) == 1  # one attempt's share: 0.5 s of 1.5 s
        assert max(took) < 1.2


def test_a_send_failing_on_a_dead_broker_keeps_the_route_and_asks_no_nameserver(
    make_cluster: Callable[..., LocalCluster],
) -> None:
    cluster = make_cluster(brokers=2)  # the nameserver keeps the dead broker for 2 minutes
    ns = cluster.nameserver
    with Admin(ns) as admin:
        admin.create_topic("stays", queues=2)
    with Producer(ns) as producer:  # no latency table: round robin keeps reaching broker-b
        assert {producer.send(Message("stays", b"x")).broker_name for _ in range(8)} == {"broker-a", "broker-b"}
        cluster.kill_broker("broker-b")
        queries = producer.routes.counters.queries
        for _ in range(8):
            assert producer.send(Message("stays", b"y")).broker_name == "broker-a"  # retried on broker-a
        assert producer.routes.counters.queries == queries


def test_no_acknowledged_message_is_lost_while_a_broker_dies_and_comes_back(
    make_cluster: Callable[..., LocalCluster],
) -> None:
    cluster = make_cluster(brokers=2, nameserver_config=FAST_NAMESERVER, broker_config=FAST_BROKER)
    ns = cluster.nameserver
    with Admin(ns) as admin:
        admin.create_topic("no-loss", queues=4)
    acked: set[bytes] = set()
    consumed: set[bytes] = set()
    lock = threading.Lock()
    stop = threading.Event()

    def produce(worker: int) -> None:
        with Producer(ns, send_latency_fault_enable=True, send_timeout_ms=1000) as producer:
            i = 0
            while not stop.is_set():
                body = f"p{worker}-{i}".encode()
                try:
                    producer.send(Message("no-loss", body))
                    with lock:
                        acked.add(body)
                except RocketSparkError:
                    time.sleep(0.05)  # not acknowledged: allowed to be lost
                i += 1
                time.sleep(0.002)

    def handle(messages: list[MessageExt]) -> None:
        with lock:
            consumed.update(m.body for m in messages)

    members = [
        GroupConsumer(
            ns,
            "auditors",
            "no-loss",
            handle,
            rebalance_interval_ms=2000,
            heartbeat_interval_ms=300,
            start_from="earliest",
            client_id=f"member-{i}",
        ).start()
        for i in range(3)
    ]
    producers = [threading.Thread(target=produce, args=(w,)) for w in range(2)]
    try:
        for p in producers:
            p.start()
        eventually(lambda: len(acked) > 300, timeout_s=30)
        cluster.kill_broker("broker-b")
        time.sleep(2.0)
        cluster.start_broker("broker-b")
        eventually(lambda: len(acked) > 1200, timeout_s=60)
        stop.set()
        for p in producers:
            p.join(30)

        def all_consumed() -> bool:
            with lock:
                return acked <= consumed

        eventually(all_consumed, timeout_s=60, interval_s=0.2)

        def converged() -> bool:
            owned = [m.assignment for m in members]
            union = set().union(*owned)
            return len(union) == 8 and sum(len(o) for o in owned) == 8

        eventually(converged, timeout_s=30)
        assert all(len(m.assignment) in (2, 3) for m in members)  # average: 8 queues over 3 members
    finally:
        stop.set()
        for m in members:
            m.stop()


def member(ns: str, client_id: str) -> GroupConsumer:
    """A started member of group "takeover" on "shared-queues": heartbeat 200 ms, rebalance 1 s."""
    return GroupConsumer(
        ns,
        "takeover",
        "shared-queues",
        lambda messages: None,
        rebalance_interval_ms=1000,
        heartbeat_interval_ms=200,
        client_id=client_id,
    ).start()


# The same member in a process of its own, to be killed without leaving.
MEMBER = """
import sys, time
from tests.integration.test_fault_tolerance import member
member(sys.argv[1], "doomed")
print("member started", flush=True)
time.sleep(600)
"""
ROOT = Path(__file__).resolve().parents[2]


def test_a_member_that_leaves_or_dies_has_its_queues_taken_over(
    make_cluster: Callable[..., LocalCluster],
) -> None:
    import subprocess
    import sys

    cluster = make_cluster(brokers=1, broker_config=FAST_BROKER)  # heartbeat timeout: 2 s
    ns = cluster.nameserver
    with Admin(ns) as admin:
        admin.create_topic("shared-queues", queues=6)
    keep = member(ns, "survivor")
    leaving = member(ns, "leaver")
    doomed: subprocess.Popen[str] | None = None
    try:
        eventually(lambda: len(keep.assignment) == 3 and len(leaving.assignment) == 3, timeout_s=10)
        started = time.monotonic()
        leaving.stop()  # a clean leave unregisters at once
        eventually(lambda: len(keep.assignment) == 6, timeout_s=10)
        assert time.monotonic() - started < 2.5  # one heartbeat round, not the timeout

        doomed = subprocess.Popen([sys.executable, "-c", MEMBER, ns], stdout=subprocess.PIPE, text=True, cwd=ROOT)
        assert doomed.stdout is not None and "member started" in doomed.stdout.readline()
        eventually(lambda: len(keep.assignment) == 3, timeout_s=10)
        started = time.monotonic()
        doomed.kill()  # dies without leaving
        doomed.wait(10)
        eventually(lambda: len(keep.assignment) == 6, timeout_s=15)
        # the broker's heartbeat timeout (2 s) plus a heartbeat, well within a rebalance period more
        assert time.monotonic() - started < 2.0 + 1.0 + 1.5
    finally:
        keep.stop()
        if doomed is not None and doomed.poll() is None:
            doomed.kill()
            doomed.wait(10)
