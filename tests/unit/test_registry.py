"""Registration with nameservers: a hung nameserver holds back no other; no double start."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future
from pathlib import Path

from broker.broker import Broker
from broker.config import BrokerConfig
from rocketspark.protocol.command import RemotingCommand
from rocketspark.remoting.transport import Transport
from tests.helpers import Registrations

HUNG, HEALTHY = "127.0.0.1:1", "127.0.0.1:2"


def make_broker(tmp_path: Path, nameservers: Transport) -> Broker:
    config = BrokerConfig(data_dir=str(tmp_path / "b"), nameservers=[HUNG, HEALTHY], register_interval_ms=60_000)
    return Broker(config, nameserver_transport=nameservers)


class OneHung:
    """HUNG answers only once released; HEALTHY answers once HUNG is holding its call, so a
    registry that lets one nameserver hold back another fails either way round."""

    def __init__(self) -> None:
        self.hung_started, self.release, self.healthy_done = threading.Event(), threading.Event(), threading.Event()

    def invoke(self, address: str, request: RemotingCommand, timeout_ms: int | None = None) -> RemotingCommand:
        if address == HUNG:
            self.hung_started.set()
            self.release.wait(10)
        elif self.hung_started.wait(5):
            self.healthy_done.set()
        return request.response()

    def invoke_async(
        self, address: str, request: RemotingCommand, timeout_ms: int | None = None
    ) -> Future[RemotingCommand]:
        raise AssertionError("the registry registers with blocking calls, one thread per nameserver")


def test_a_hung_nameserver_does_not_delay_registering_with_the_others(tmp_path: Path) -> None:
    nameservers = OneHung()
    broker = make_broker(tmp_path, nameservers)
    registering = threading.Thread(target=asyncio.run, args=(broker.registry.register_now(),))
    registering.start()
    try:
        assert nameservers.hung_started.wait(5)
        assert nameservers.healthy_done.wait(5), "registering with the healthy nameserver waited for the hung one"
    finally:
        nameservers.release.set()
        registering.join()
        broker.registry.close()


def test_the_periodic_loop_does_not_register_again_at_start(tmp_path: Path) -> None:
    nameservers = Registrations()
    broker = make_broker(tmp_path, nameservers)

    async def scenario() -> None:
        loop = asyncio.create_task(broker.registry.run())
        await asyncio.sleep(0.05)
        loop.cancel()

    try:
        asyncio.run(scenario())  # returns once registrations started in threads, if any, are answered
    finally:
        broker.registry.close()
    assert nameservers.changed == []  # start() registers once; the loop waits a full interval first
