"""Label values as RocketMQ 5 writes them (issue 30): codes by name, a message's type (as the
broker's check of a sent batch counts it, on both of its paths), and the metrics ports
``cluster up --metrics-port`` gives."""

from __future__ import annotations

import pytest

from rocketspark.codec.build import encode_messages
from rocketspark.codec.ingest import built_here, check_sent
from rocketspark.metrics.labels import MessageType, message_type, request_name, response_name
from rocketspark.ports import metrics_port_plan
from rocketspark.protocol.codes import RequestCode, ResponseCode
from rocketspark.protocol.types import Message


def test_codes_are_named_in_lower_snake_case() -> None:
    assert request_name(RequestCode.SEND_MESSAGE) == "send_message"
    assert request_name(RequestCode.SEND_BATCH_MESSAGE) == "send_batch_message"
    assert request_name(310) == "send_message_v2"  # a 4.x client's, by RocketMQ's name
    assert request_name(77777) == "77777"  # no name: the number
    assert request_name("SendMessage") == request_name("send_message") == "send_message"  # a v2 method
    assert response_name(ResponseCode.SUCCESS) == "success"
    assert response_name(ResponseCode.SYSTEM_BUSY) == "system_busy"
    assert response_name("BAD_REQUEST") == "bad_request" and response_name(4242) == "4242"


@pytest.mark.parametrize(
    ("properties", "kind"),
    [
        ({}, MessageType.NORMAL),
        ({"KEYS": "k"}, MessageType.NORMAL),
        ({"__SHARDINGKEY": "order-1"}, MessageType.FIFO),
        ({"DELAY": "3"}, MessageType.DELAY),
        ({"DELAY": "0"}, MessageType.NORMAL),
        ({"TIMER_DELIVER_MS": "1700000000000", "__SHARDINGKEY": "g"}, MessageType.DELAY),
        ({"TRAN_MSG": "true", "DELAY": "2"}, MessageType.TRANSACTION),
        ({"_SYS_MSG_PRIORITY_": "3"}, MessageType.PRIORITY),
        ({"_SYS_MSG_PRIORITY_": "0"}, MessageType.PRIORITY),
        ({"_SYS_MSG_PRIORITY_": "3", "__SHARDINGKEY": "g"}, MessageType.FIFO),
    ],
)
def test_a_message_type_comes_from_its_properties(properties: dict[str, str], kind: MessageType) -> None:
    assert message_type(properties) is kind


def _kinds(messages: list[Message], small: int) -> dict[str, int]:
    record = encode_messages("t", messages)
    return dict(check_sent(record, max_body=1 << 20, max_section=1 << 24, small=small).kinds)


def test_the_check_of_a_sent_batch_counts_its_types_the_same_on_both_paths() -> None:
    messages = [
        Message("t", b"a"),
        Message("t", b"b", properties={"__SHARDINGKEY": "g"}),
        Message("t", b"c", properties={"DELAY": "1"}),
        Message("t", b"d", properties={"__SHARDINGKEY": "h"}),
    ]
    assert _kinds(messages, small=16) == _kinds(messages, small=0) == {"fifo": 2, "delay": 1}
    assert _kinds([Message("t", b"x")] * 40, small=16) == {}  # no properties: nothing decoded, nothing typed
    assert dict(built_here(encode_messages("t", messages)).kinds) == {"fifo": 2, "delay": 1}
    assert built_here(encode_messages("t", [Message("t", b"x", keys=["k"])])).kinds == ()


def test_metrics_ports_go_nameservers_then_brokers_then_further_replicas() -> None:
    groups = ["broker-a", "broker-b"]
    assert metrics_port_plan(5556, "nameserver", groups, 1, 1) == 5556
    assert [metrics_port_plan(5556, g, groups, 1, 1) for g in groups] == [5557, 5558]
    keys = ["broker-a-r0", "broker-b-r0", "broker-a-r1", "broker-b-r1"]
    assert [metrics_port_plan(5556, k, groups, 1, 2) for k in keys] == [5557, 5558, 5559, 5560]
    assert metrics_port_plan(5556, "nameserver-1", groups, 2, 1) == 5557
    assert metrics_port_plan(5556, "broker-a", groups, 2, 1) == 5558
    assert metrics_port_plan(5556, "broker-c", groups, 1, 1) == 0  # added later: a free port
