"""Group consumer against a real cluster: a failing handler neither loses messages nor its queue."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from rocketspark import Admin, GroupConsumer, LocalCluster, Message, Producer
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
