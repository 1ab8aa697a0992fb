"""The group consumer's own logic, without a cluster: allocation inputs and releasing workers."""

from __future__ import annotations

import threading
import time

import pytest

from rocketspark import GroupConsumer
from rocketspark.client.allocate import average, consistent_hash
from rocketspark.client.group_consumer import _Worker, queue_name

MEMBERS = ["m-0", "m-1", "m-2"]


def member(client_id: str, strategy: str, queues: int) -> GroupConsumer:
    group = GroupConsumer("127.0.0.1:9876", "g", "t", lambda messages: None, strategy=strategy, client_id=client_id)
    group.consumer.queues = lambda topic: [None] * queues  # type: ignore[method-assign,assignment,return-value]
    group.members = list(MEMBERS)
    return group


@pytest.mark.parametrize("strategy", ["average", "average_by_circle", "consistent_hash"])
def test_every_queue_goes_to_exactly_one_member(strategy: str) -> None:
    groups = [member(m, strategy, 10) for m in MEMBERS]
    try:
        shares = [g._share("t") for g in groups]
        assert sorted(q for share in shares for q in share) == list(range(10))
    finally:
        for g in groups:
            g.consumer.close()


def test_shares_match_the_strategies_over_queue_ids_and_rocketmq_queue_names() -> None:
    for client_id in MEMBERS:
        hashed, averaged = member(client_id, "consistent_hash", 12), member(client_id, "average", 12)
        try:
            expected = consistent_hash(client_id, list(range(12)), MEMBERS, key=lambda q: queue_name("t", q))
            assert hashed._share("t") == expected
            assert averaged._share("t") == average(client_id, list(range(12)), MEMBERS)
        finally:
            hashed.consumer.close()
            averaged.consumer.close()


def test_releasing_tells_every_worker_to_stop_before_waiting_for_any() -> None:
    group = member("m-0", "average", 4)
    others_stopped: dict[int, bool] = {}

    def pull_loop(worker: _Worker) -> None:  # stands in for a worker in a long poll
        worker.stop.wait()
        time.sleep(0.1)
        others_stopped[worker.key[1]] = all(w.stop.is_set() for w in workers)

    workers = [_Worker(("t", q), 0, 0) for q in range(4)]
    for worker in workers:
        worker.thread = threading.Thread(target=pull_loop, args=(worker,))
        worker.thread.start()
        group.workers[worker.key] = worker
    try:
        group._release(sorted(group.workers))
        assert others_stopped == dict.fromkeys(range(4), True) and group.workers == {}
    finally:
        for worker in workers:
            worker.stop.set()
        group.consumer.close()
