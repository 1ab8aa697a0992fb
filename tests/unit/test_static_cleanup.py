"""Dropping expired static-topic segments: remote segments' brokers looked up once per round."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

from broker.broker import Broker
from broker.config import BrokerConfig
from broker.static_cleanup import SegmentOffsets, clean_expired_segments
from rocketspark.errors import ConnectError
from rocketspark.protocol.bodies import pack
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.static_mapping import LogicQueueMappingItem, TopicQueueMappingDetail
from rocketspark.protocol.types import TopicConfig

NS_DOWN, NS_STALE, NS_FULL = "127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"
BROKER_B = "127.0.0.1:4"


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    b = Broker(BrokerConfig(data_dir=str(tmp_path / "a"), nameservers=[NS_DOWN, NS_STALE, NS_FULL]))
    b.open()
    # broker-a leads logical queues 0 and 1; their first segments, sealed, live on broker-b.
    items = {
        q: [LogicQueueMappingItem(0, q, "broker-b", 0, end_offset=5), LogicQueueMappingItem(1, q, "broker-a", 5)]
        for q in (0, 1)
    }
    b.static.update(TopicQueueMappingDetail("st", 2, "broker-a", 1, hosted_queues=items))
    b.topics.put(TopicConfig("st", 2, 2), 0)
    yield b
    b.close()


class FakeNetwork:
    """Three nameservers (one down, one that does not know broker-b yet) and broker-b."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    def invoke(self, address: str, request: RemotingCommand, *args: Any, **kwargs: Any) -> RemotingCommand:
        self.calls.append((address, request.code))
        if address == NS_DOWN:
            raise ConnectError(f"nameserver at {address}: connection refused", address=address)
        if request.code == RequestCode.GET_BROKER_CLUSTER_INFO:
            brokers = {"broker-a": {"addr": "127.0.0.1:5"}}
            if address == NS_FULL:
                brokers["broker-b"] = {"addr": BROKER_B}
            return request.response(body=pack({"clusters": {}, "brokers": brokers}))
        assert (address, request.code) == (BROKER_B, RequestCode.GET_MIN_OFFSET)
        return request.response(ext={"offset": 5})  # retention emptied the segment

    def invoke_async(
        self, address: str, request: RemotingCommand, timeout_ms: int | None = None
    ) -> Future[RemotingCommand]:
        future: Future[RemotingCommand] = Future()
        try:
            future.set_result(self.invoke(address, request, timeout_ms))
        except Exception as exc:
            future.set_exception(exc)
        return future


def test_a_remote_segment_s_broker_is_found_through_any_nameserver_asked_once_per_round(broker: Broker) -> None:
    network = FakeNetwork()
    offsets = SegmentOffsets("broker-a", broker.store, network, [NS_DOWN, NS_STALE, NS_FULL])
    assert asyncio.run(clean_expired_segments(broker.static, offsets)) == ["st"]
    calls = network.calls
    detail = broker.static.details["st"]
    assert [item.gen for item in detail.hosted_queues[0]] == [1]
    assert [item.gen for item in detail.hosted_queues[1]] == [1]
    cluster_info = [address for address, code in calls if code == RequestCode.GET_BROKER_CLUSTER_INFO]
    assert cluster_info == [NS_DOWN, NS_STALE, NS_FULL]  # each asked once in the round, not once per segment
    assert [address for address, code in calls if code == RequestCode.GET_MIN_OFFSET] == [BROKER_B, BROKER_B]
