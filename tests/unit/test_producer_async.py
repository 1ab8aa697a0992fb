"""send_async's thread pool: one per producer, and none after close."""

from __future__ import annotations

import concurrent.futures
import threading
import time
from typing import Any

import pytest

from rocketspark import Message, Producer
from rocketspark.errors import ClientError
from rocketspark.protocol.types import SendResult, SendStatus

RESULT = SendResult(SendStatus.SEND_OK, "id", "t", "broker-a", 0, 0)


def test_concurrent_first_calls_share_one_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[object] = []

    class SlowPool(concurrent.futures.ThreadPoolExecutor):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            time.sleep(0.05)  # widens the window in which a second caller could make another
            made.append(self)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(concurrent.futures, "ThreadPoolExecutor", SlowPool)
    producer = Producer("127.0.0.1:9876", route_push=False)
    producer.send = lambda message, timeout_ms=None: RESULT  # type: ignore[method-assign]
    start = threading.Barrier(8)
    futures: list[concurrent.futures.Future[SendResult]] = []

    def submit() -> None:
        start.wait()
        futures.append(producer.send_async(Message("t", b"x")))

    threads = [threading.Thread(target=submit) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    producer.close()
    assert len(made) == 1 and [f.result() for f in futures] == [RESULT] * 8


def test_send_async_after_close_is_refused() -> None:
    producer = Producer("127.0.0.1:9876", route_push=False)
    producer.close()
    with pytest.raises(ClientError, match="this producer is closed"):
        producer.send_async(Message("t", b"x"))
    assert producer._executor is None
