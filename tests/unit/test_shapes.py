"""Request shapes: what the clients send passes, what breaks a shape is refused naming the field."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgpack
import pytest

from broker import topics as broker_topics
from broker.broker import Broker
from broker.config import BrokerConfig
from nameserver.config import NameServerConfig
from nameserver.server import NameServer
from rocketspark.errors import InvalidParameterError, MalformedRequestError
from rocketspark.protocol import shapes
from rocketspark.protocol.bodies import pack
from rocketspark.protocol.codes import RequestCode as C
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.static_mapping import LogicQueueMappingItem, TopicQueueMappingDetail
from rocketspark.protocol.types import TopicConfig
from rocketspark.protocol.validation import TOPIC_NAME_MAX

DETAIL = TopicQueueMappingDetail(
    topic="orders",
    total_queues=2,
    bname="broker-a",
    epoch=1_700_000_000_000,
    hosted_queues={
        0: [
            LogicQueueMappingItem(0, 0, "broker-a", 0, end_offset=120, time_of_start=1, time_of_end=2),
            LogicQueueMappingItem(1, 0, "broker-b", 10_000),
        ],
        1: [LogicQueueMappingItem(0, 1, "broker-a", 0)],
    },
)
REGISTRATION = {
    "cluster": "DefaultCluster",
    "broker": "broker-a",
    "addr": "127.0.0.1:10911",
    "perm": 6,
    "version": 3,
    "topics": [TopicConfig("orders", 8, 8).to_wire(), TopicConfig("TBW102", 8, 8, 7).to_wire()],
    "static": [DETAIL.to_wire()],
    "changed": ["orders"],
}


def check(code: int, ext: dict[str, Any] | None = None, body: bytes = b"") -> None:
    shapes.check(RemotingCommand.request(code, ext, body))


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    b = Broker(BrokerConfig(data_dir=str(tmp_path / "broker")))
    yield b


def test_every_code_the_servers_serve_has_a_shape_and_every_shape_a_server(broker: Broker) -> None:
    nameserver = NameServer(NameServerConfig(data_dir=""))
    served = {
        *broker.dispatcher.handlers,
        *broker.dispatcher.stream_handlers,
        *nameserver.dispatcher.handlers,
        *nameserver.dispatcher.stream_handlers,
    }
    assert served == set(shapes.SHAPES)


def test_the_limits_are_the_brokers_and_the_topic_rules() -> None:
    assert shapes.MAX_QUEUES == broker_topics.MAX_QUEUES
    check(C.GET_ROUTEINFO_BY_TOPIC, {"topic": "t" * TOPIC_NAME_MAX})
    with pytest.raises(InvalidParameterError, match="length <= 127"):
        check(C.GET_ROUTEINFO_BY_TOPIC, {"topic": "t" * (TOPIC_NAME_MAX + 1)})


@pytest.mark.parametrize(
    ("code", "ext"),
    [
        (C.SEND_MESSAGE, {"topic": "orders", "queueId": -1}),  # -1: the broker picks
        (C.SEND_MESSAGE, {"topic": "orders", "queueId": 3, "defaultTopic": "TBW102", "defaultTopicQueueNums": 4}),
        (C.SEND_BATCH_MESSAGE, {"topic": "orders", "logicQueueId": 2, "epoch": 1_700_000_000_000}),
        (C.SEND_BATCH_MESSAGE, {"topic": "orders", "queueId": 0, "producerId": "spark:q:7:3", "seq": 0}),
        (C.PULL_MESSAGE, {"topic": "orders", "queueId": 0, "queueOffset": 0, "maxMsgNums": 32, "suspendTimeoutMs": 0}),
        (
            C.PULL_MESSAGE,
            {
                "topic": "orders",
                "queueId": 1,
                "queueOffset": 5,
                "maxMsgNums": 0,
                "maxBytes": 1 << 20,
                "tags": ["A", "B"],
                "endOffset": 9,
                "logicQueueId": 3,
                "gen": 1,
                "epoch": 7,
            },
        ),
        (C.GET_MAX_OFFSET, {"topic": "orders", "queueId": 1023}),
        (C.SEARCH_OFFSET_BY_TIMESTAMP, {"topic": "orders", "queueId": 0, "timestamp": 1_700_000_000_000}),
        (C.UPDATE_CONSUMER_OFFSET, {"consumerGroup": "g", "topic": "orders", "queueId": 0, "commitOffset": 10}),
        (
            C.QUERY_CONSUMER_OFFSET,
            {"consumerGroup": "g", "topic": "orders", "queueId": 3, "logical": True, "logicQueueId": 3, "gen": 0},
        ),
        (C.UPDATE_AND_CREATE_TOPIC, {"topic": "orders", "writeQueueNums": 8, "readQueueNums": 8, "perm": 6}),
        (C.UPDATE_BROKER_CONFIG, {"brokerPermission": 4}),
        (C.HEART_BEAT, {"consumerGroup": "g", "clientId": "host@1@abc", "topics": ["orders"]}),
        (C.SEAL_LOGIC_QUEUES, {"topic": "orders", "logicQueueIds": [0, 1]}),
        (C.UNREGISTER_BROKER, {"brokerName": "broker-a", "clusterName": "C", "addr": "127.0.0.1:10911"}),
        (C.SUBSCRIBE_TOPIC_ROUTE, {"clientId": "host@1@abc", "topics": ["%RETRY%g", "TBW102"]}),
        (C.UNSUBSCRIBE_TOPIC_ROUTE, {"clientId": "host@1@abc"}),
        (C.OPEN_PUSH_STREAM, {"clientId": "host@1@abc"}),
        (C.GET_COUNTERS, {"fieldsNotDeclaredAreIgnored": [1, 2]}),
    ],
)
def test_what_the_clients_send_passes(code: int, ext: dict[str, Any]) -> None:
    check(code, ext)


def test_a_brokers_registration_and_a_static_mapping_pass() -> None:
    check(C.REGISTER_BROKER, {"brokerName": "broker-a", "clusterName": "DefaultCluster"}, pack(REGISTRATION))
    check(C.REGISTER_BROKER, {}, pack({**REGISTRATION, "incremental": True}))
    check(C.UPDATE_AND_CREATE_STATIC_TOPIC, {}, pack({"mapping": DETAIL.to_wire(), "force": False}))
    check(C.SEND_MESSAGE, {"topic": "orders"}, b"\x00binary batch: its handler checks it")


@pytest.mark.parametrize(
    ("code", "ext", "fragment"),
    [
        (C.PULL_MESSAGE, {"topic": "t", "queueId": -7, "queueOffset": 0}, '"queueId" is invalid: expected `int` >= 0'),
        (C.SEND_MESSAGE, {"topic": "t", "queueId": -7}, '"queueId" is invalid: expected `int` >= -1, got -7'),
        (C.GET_MIN_OFFSET, {"topic": "t", "queueId": 1024}, '"queueId" is invalid: expected `int` <= 1023'),
        (C.GET_ROUTEINFO_BY_TOPIC, {"topic": ["orders"]}, '"topic" is invalid: expected `str`, got `array`'),
        (C.UPDATE_AND_CREATE_TOPIC, {"topic": "no/slashes"}, '"topic" is invalid: expected `str` of 1-127 letters'),
        (C.PULL_MESSAGE, {"topic": "t"}, 'PULL_MESSAGE (11): the header field "queueId" is required'),
        (C.PULL_MESSAGE, {"topic": "t", "queueId": "0", "queueOffset": 0}, "expected `int`, got `str`"),
        (C.PULL_MESSAGE, {"topic": "t", "queueId": True, "queueOffset": 0}, "expected `int`, got `bool`"),
        (C.PULL_MESSAGE, {"topic": "t", "queueId": 0, "queueOffset": 2**64}, '"queueOffset" is invalid'),
        (C.UPDATE_CONSUMER_OFFSET, {"consumerGroup": "", "topic": "t", "queueId": 0}, '"consumerGroup" is invalid'),
        (C.UPDATE_BROKER_CONFIG, {"brokerPermission": 8}, '"brokerPermission" is invalid: expected `int` <= 7'),
        (C.SEAL_LOGIC_QUEUES, {"topic": "t", "logicQueueIds": [0, -1]}, '"logicQueueIds[1]" is invalid'),
        (
            C.SUBSCRIBE_TOPIC_ROUTE,
            {"clientId": "c", "topics": ["t"] * 1025},
            '"topics" is invalid: expected `array` of length <= 1024, got 1025 items',
        ),
        (C.SUBSCRIBE_TOPIC_ROUTE, {"clientId": "c", "topics": ["ok", 7]}, '"topics[1]" is invalid'),
        (C.OPEN_PUSH_STREAM, {"clientId": "x" * 513}, '"clientId" is invalid: expected `str` of length <= 512'),
    ],
)
def test_a_header_out_of_its_shape_is_an_invalid_parameter_naming_the_field(
    code: int, ext: dict[str, Any], fragment: str
) -> None:
    with pytest.raises(InvalidParameterError) as info:
        check(code, ext)
    assert fragment in info.value.message
    assert info.value.message.startswith(f"{C(code).name} ({int(code)}): the header field")


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"broker": 1}, 'the body field "broker" is invalid: expected `str`, got `int`'),
        ({"addr": "nowhere"}, 'the body field "addr" is invalid: expected `str` of the form host:port'),
        ({"topics": [{"name": "x", "r": 1, "perm": 6}]}, 'the body field "topics[0].w" is required'),
        ({"topics": [{"name": "x", "r": 0, "w": 1, "perm": 6}]}, '"topics[0].r" is invalid: expected `int` >= 1'),
        ({"topics": [{"name": "t", "r": 1, "w": 1, "perm": 6}] * 65_537}, '"topics" is invalid: expected `array`'),
        ({"changed": "orders"}, '"changed" is invalid: expected `array`, got `str`'),
        ({"incremental": 1}, '"incremental" is invalid: expected `bool`, got `int`'),
        (
            {"static": [{**DETAIL.to_wire(), "hostedQueues": {"01": [[0, 0, "b", 0, 0, -1, -1, -1]]}}]},
            '"static[0].hostedQueues (a key)" is invalid: expected `str` naming a logical queue, 0-1023',
        ),
        (
            {"static": [{**DETAIL.to_wire(), "hostedQueues": {"1": [[0, -7, "b", 0, 0, -1, -1, -1]]}}]},
            '"static[0].hostedQueues[...][0][1]" is invalid: expected `int` >= 0',
        ),
    ],
)
def test_a_registration_out_of_its_shape_is_an_invalid_parameter_naming_the_field(
    change: dict[str, Any], fragment: str
) -> None:
    with pytest.raises(InvalidParameterError) as info:
        check(C.REGISTER_BROKER, {}, pack({**REGISTRATION, **change}))
    assert fragment in info.value.message and info.value.message.startswith("REGISTER_BROKER (103): ")


def test_a_body_that_is_no_map_or_no_msgpack_or_not_expected_is_refused() -> None:
    with pytest.raises(InvalidParameterError, match="the body is invalid: expected `object`, got `array`"):
        check(C.REGISTER_BROKER, {}, msgpack.packb([REGISTRATION]))
    with pytest.raises(MalformedRequestError, match=r"REGISTER_BROKER \(103\) body is not valid msgpack"):
        check(C.REGISTER_BROKER, {}, b"\xc1")
    with pytest.raises(InvalidParameterError, match=r"GET_ROUTEINFO_BY_TOPIC \(105\) carries no body; this one has 3"):
        check(C.GET_ROUTEINFO_BY_TOPIC, {"topic": "t"}, b"abc")
    with pytest.raises(InvalidParameterError, match='the body field "mapping" is required'):
        check(C.UPDATE_AND_CREATE_STATIC_TOPIC, {}, pack({"force": True}))


def test_a_code_without_a_shape_is_left_to_the_dispatcher() -> None:
    check(4242, {"anything": -7})
    with pytest.raises(ValueError, match="4242"):
        shapes.require(4242)
