"""Registration with nameservers: a hung nameserver holds back no other; no double start."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.config import BrokerConfig
from broker.server import Broker
from rocketspark.protocol.command import RemotingCommand

HUNG, HEALTHY = "127.0.0.1:1", "127.0.0.1:2"


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    b = Broker(BrokerConfig(data_dir=str(tmp_path / "b"), nameservers=[HUNG, HEALTHY], register_interval_ms=60_000))
    yield b
    b.registry.close()


def test_a_hung_nameserver_does_not_delay_registering_with_the_others(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    hung_started, release, healthy_done = threading.Event(), threading.Event(), threading.Event()

    def invoke(address: str, request: RemotingCommand, *args: Any, **kwargs: Any) -> RemotingCommand:
        if address == HUNG:
            hung_started.set()
            release.wait(10)
        else:
            healthy_done.set()
        return request.response()

    monkeypatch.setattr(broker.registry.client, "invoke", invoke)
    registry = broker.registry
    hung = threading.Thread(target=registry._register_one, args=(HUNG, registry._lock(HUNG), b""))
    hung.start()
    try:
        assert hung_started.wait(5)
        healthy = threading.Thread(target=registry._register_one, args=(HEALTHY, registry._lock(HEALTHY), b""))
        healthy.start()
        assert healthy_done.wait(5), "registering with the healthy nameserver waited for the hung one"
        healthy.join()
    finally:
        release.set()
        hung.join()


def test_the_periodic_loop_does_not_register_again_at_start(broker: Broker, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[object] = []

    async def register_now(changed: list[str] | None = None) -> None:
        calls.append(changed)

    monkeypatch.setattr(broker.registry, "register_now", register_now)

    async def scenario() -> None:
        loop = asyncio.create_task(broker.registry.run())
        await asyncio.sleep(0.05)
        loop.cancel()

    asyncio.run(scenario())
    assert calls == []  # start() registers once; the loop waits a full interval first
