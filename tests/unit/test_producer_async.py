"""send_async's thread pool: one per producer, and none after close."""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from rocketspark import Message, Producer
from rocketspark.errors import ClientError
from rocketspark.protocol.types import SendResult, SendStatus

RESULT = SendResult(SendStatus.SEND_OK, "id", "t", "broker-a", 0, 0)


class Pool(concurrent.futures.Executor):
    """Records what it is handed and answers each with RESULT (no broker needed)."""

    def __init__(self) -> None:
        self.submitted: list[tuple[Callable[..., Any], tuple[Any, ...]]] = []

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
        self.submitted.append((fn, args))
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        future.set_result(RESULT)
        return future


class Pools:
    """The producer's ``PoolFactory``: slow to make a pool, which widens the window in which a
    second caller could make another."""

    def __init__(self) -> None:
        self.made: list[Pool] = []

    def __call__(self) -> concurrent.futures.Executor:
        time.sleep(0.05)
        pool = Pool()
        self.made.append(pool)
        return pool


def test_concurrent_first_calls_share_one_pool() -> None:
    pools = Pools()
    producer = Producer("127.0.0.1:9876", route_push=False, send_async_pool=pools)
    start = threading.Barrier(8)
    futures: list[concurrent.futures.Future[SendResult]] = []
    message = Message("t", b"x")

    def submit() -> None:
        start.wait()
        futures.append(producer.send_async(message))

    threads = [threading.Thread(target=submit) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    producer.close()
    assert len(pools.made) == 1 and [f.result() for f in futures] == [RESULT] * 8
    assert pools.made[0].submitted == [(producer.send, (message,))] * 8


def test_send_async_after_close_is_refused() -> None:
    pools = Pools()
    producer = Producer("127.0.0.1:9876", route_push=False, send_async_pool=pools)
    producer.close()
    with pytest.raises(ClientError, match="this producer is closed"):
        producer.send_async(Message("t", b"x"))
    assert pools.made == []
