"""The group consumer's own logic, without a cluster: allocation inputs and releasing workers."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from rocketspark import GroupConsumer
from rocketspark.client.allocate import average, consistent_hash
from rocketspark.client.rebalance import Worker, queue_name, share_of

MEMBERS = ["m-0", "m-1", "m-2"]


@pytest.mark.parametrize("strategy", ["average", "average_by_circle", "consistent_hash"])
def test_every_queue_goes_to_exactly_one_member(strategy: str) -> None:
    shares = [share_of(strategy, m, MEMBERS, "t", 10) for m in MEMBERS]
    assert sorted(q for share in shares for q in share) == list(range(10))


def test_shares_match_the_strategies_over_queue_ids_and_rocketmq_queue_names() -> None:
    for client_id in MEMBERS:
        expected = consistent_hash(client_id, list(range(12)), MEMBERS, key=lambda q: queue_name("t", q))
        assert share_of("consistent_hash", client_id, MEMBERS, "t", 12) == expected
        assert share_of("average", client_id, MEMBERS, "t", 12) == average(client_id, list(range(12)), MEMBERS)


def test_a_member_that_knows_no_members_yet_owns_nothing() -> None:
    assert share_of("average", "m-0", [], "t", 12) == []


def test_stopping_tells_every_worker_to_stop_before_waiting_for_any() -> None:
    with socket.socket() as sock:  # a nameserver address nobody listens on: leaving the group asks no broker
        sock.bind(("127.0.0.1", 0))
        nowhere = f"127.0.0.1:{sock.getsockname()[1]}"
    group = GroupConsumer(nowhere, "g", "t", lambda messages: None, client_id="m-0")
    others_stopped: dict[int, bool] = {}

    def pull_loop(worker: Worker) -> None:  # stands in for a worker in a long poll
        worker.stop.wait()
        time.sleep(0.1)
        others_stopped[worker.key[1]] = all(w.stop.is_set() for w in workers)

    workers = [Worker(("t", q), 0, 0) for q in range(4)]
    for worker in workers:
        worker.thread = threading.Thread(target=pull_loop, args=(worker,))
        worker.thread.start()
        group.workers[worker.key] = worker
    try:
        group.stop()
        assert others_stopped == dict.fromkeys(range(4), True) and group.workers == {}
    finally:
        for worker in workers:
            worker.stop.set()
        group.consumer.close()
