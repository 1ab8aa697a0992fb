"""Broker request handlers called in-process on a real store (no network, no nameserver)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from broker.broker import Broker
from broker.config import BrokerConfig
from broker.handlers.pull import handle_pull
from broker.handlers.send import handle_send
from broker.handlers.static import seal_queues
from broker.store.metafile import write_json_atomic
from rocketspark.codec.build import Idempotence
from rocketspark.errors import IllegalTopicNameError, InvalidParameterError, NotLeaderForQueueError
from rocketspark.protocol.bodies import unpack
from rocketspark.protocol.codes import RequestCode, ResponseCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.static_mapping import LogicQueueMappingItem, TopicQueueMappingDetail
from rocketspark.protocol.types import TopicConfig
from tests.helpers import Registrations, batch_record, put_batch


def broker_config(tmp_path: Path) -> BrokerConfig:
    return BrokerConfig(data_dir=str(tmp_path / "broker"), segment_bytes=64 * 1024, max_message_bytes=8 * 1024)


@pytest.fixture
def nameserver() -> Registrations:
    return Registrations()


@pytest.fixture
def broker(tmp_path: Path, nameserver: Registrations) -> Iterator[Broker]:
    config = replace(broker_config(tmp_path), nameservers=["127.0.0.1:9876"])
    b = Broker(config, nameserver_transport=nameserver)
    b.open()
    b.topics.put(TopicConfig("orders", 2, 2), 0)
    b.topics.put(TopicConfig("other", 1, 1), 0)
    yield b
    b.close()


def put(broker: Broker, topic: str, queue_id: int, body: bytes = b"x") -> None:
    put_batch(broker.store, topic, queue_id, [body])


def pull_request(topic: str, queue_id: int, offset: int, suspend_ms: int) -> RemotingCommand:
    ext = {"topic": topic, "queueId": queue_id, "queueOffset": offset, "suspendTimeoutMs": suspend_ms}
    return RemotingCommand.request(RequestCode.PULL_MESSAGE, ext)


def test_a_held_pull_answers_at_once_when_the_broker_closes(broker: Broker) -> None:
    async def scenario() -> int:
        held = asyncio.create_task(handle_pull(broker.pull_context, pull_request("orders", 0, 0, 30_000)))
        await asyncio.sleep(0.05)
        assert not held.done()
        broker.longpoll.close()
        response = await asyncio.wait_for(held, 5)  # without the closing flag it waits 30 s again
        return response.code

    assert asyncio.run(scenario()) == ResponseCode.PULL_NOT_FOUND


def test_changing_one_topic_wakes_only_the_pulls_held_on_it(broker: Broker) -> None:
    async def scenario() -> tuple[bool, bool]:
        on_orders = asyncio.create_task(broker.longpoll.wait(("orders", 1), 5))
        on_other = asyncio.create_task(broker.longpoll.wait(("other", 0), 0.2))
        await asyncio.sleep(0.01)
        broker.longpoll.notify_topic("orders")
        return await on_orders, await on_other

    assert asyncio.run(scenario()) == (True, False)


def test_a_held_pull_is_answered_when_a_message_arrives(broker: Broker) -> None:
    async def scenario() -> tuple[int, int]:
        held = asyncio.create_task(handle_pull(broker.pull_context, pull_request("orders", 1, 0, 30_000)))
        await asyncio.sleep(0.05)
        put(broker, "orders", 1)
        broker.longpoll.notify(("orders", 1))
        response = await asyncio.wait_for(held, 5)
        return response.code, int(response.ext["next"])

    assert asyncio.run(scenario()) == (ResponseCode.SUCCESS, 1)


def idempotent_send(topic: str, producer_id: int, seq: int, count: int, epoch: int = 0) -> RemotingCommand:
    body = batch_record(topic, [b"m%d" % i for i in range(count)], idempotence=Idempotence(producer_id, epoch, seq))
    return RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, {"topic": topic, "queueId": 0}, body)


def test_a_producer_sequence_past_the_recovered_log_does_not_drop_the_resend(tmp_path: Path) -> None:
    """producers.json says 3 messages were stored up to log offset 10**9, but the log
    recovered after a crash is empty: the resend of those messages must be stored."""
    config = broker_config(tmp_path)
    write_json_atomic(
        Path(config.data_dir) / "config" / "producers.json",
        {"producers": [[7, "orders", 0, 0, 3, time.time(), 10**9]], "log": 10**9},
    )
    broker = Broker(config)
    broker.open()
    broker.topics.put(TopicConfig("orders", 1, 1), 0)
    try:
        response = asyncio.run(handle_send(broker.send_context, idempotent_send("orders", 7, 0, 3)))
        assert (response.ext["count"], response.ext["duplicates"]) == (3, 0)
        again = asyncio.run(handle_send(broker.send_context, idempotent_send("orders", 7, 0, 3)))
        assert (again.ext["count"], again.ext["duplicates"]) == (0, 3)
    finally:
        broker.close()


def static_broker(broker: Broker) -> int:
    """Make "st" a static topic whose logical queues 0 and 2 broker-a leads and 1 broker-b
    leads; return the version of its saved mappings (one more for each save) by then."""
    items = {
        0: [LogicQueueMappingItem(0, 0, "broker-a", 0)],
        1: [LogicQueueMappingItem(0, 0, "broker-b", 0)],
        2: [LogicQueueMappingItem(0, 1, "broker-a", 0)],
    }
    broker.static.update(TopicQueueMappingDetail("st", 3, "broker-a", 1, hosted_queues=items))
    broker.topics.put(TopicConfig("st", 2, 2), 0)
    for _ in range(3):
        put(broker, "st", 0)
    put(broker, "st", 1)
    return broker.static.version


def seal(broker: Broker, ids: list[object]) -> dict[str, int]:
    cmd = RemotingCommand.request(RequestCode.SEAL_LOGIC_QUEUES, {"topic": "st", "logicQueueIds": ids})
    result: dict[str, int] = unpack(asyncio.run(seal_queues(broker.static_context, cmd)).body)["ends"]
    return result


def test_sealing_several_queues_saves_the_mapping_once_and_registers(broker: Broker, nameserver: Registrations) -> None:
    saved = static_broker(broker)
    assert seal(broker, [0, 2]) == {"0": 3, "2": 1}
    assert (broker.static.version - saved, nameserver.changed) == (1, [["st"]])
    assert seal(broker, [0]) == {"0": 3}  # a remap re-run: answered as sealed, nothing saved
    assert broker.static.version - saved == 1


@pytest.mark.parametrize("bad", ["x", None, -1, True, 1.5])
def test_a_bad_logical_queue_id_is_an_invalid_request_naming_it(
    bad: object, broker: Broker, nameserver: Registrations
) -> None:
    saved = static_broker(broker)
    with pytest.raises(InvalidParameterError, match=rf"logicQueueIds must list logical queue numbers.*{bad!r}"):
        seal(broker, [0, bad])
    assert (broker.static.version - saved, nameserver.changed) == (0, [])
    assert broker.static.details["st"].leader_of(0) is not None


def test_a_queue_this_broker_does_not_lead_fails_the_seal_before_anything_is_sealed(
    broker: Broker, nameserver: Registrations
) -> None:
    saved = static_broker(broker)
    with pytest.raises(NotLeaderForQueueError, match="does not lead logical queue 1"):
        seal(broker, [0, 1])
    assert broker.static.details["st"].leader_of(0) is not None
    assert (broker.static.version - saved, nameserver.changed) == (0, [])


def test_a_seal_that_took_effect_is_registered_even_if_saving_it_failed(
    broker: Broker, nameserver: Registrations
) -> None:
    static_broker(broker)
    broker.static.path.unlink()
    broker.static.path.mkdir()  # a directory in the mapping file's place: saving it fails
    with pytest.raises(IsADirectoryError):
        seal(broker, [0])
    assert broker.static.details["st"].leader_of(0) is None  # sealed here all the same
    assert nameserver.changed == [["st"]]


def test_a_logical_offset_commit_for_an_illegal_topic_name_is_refused(broker: Broker) -> None:
    handler = broker.dispatcher.handlers[RequestCode.UPDATE_CONSUMER_OFFSET]
    ext = {"consumerGroup": "g", "topic": "a@b", "queueId": 0, "commitOffset": 1, "logical": True}
    with pytest.raises(IllegalTopicNameError, match='topic name "a@b" is illegal'):
        asyncio.run(handler(RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, ext)))
    assert broker.offsets.table == {}
