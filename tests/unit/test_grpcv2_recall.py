"""Recall handles: RocketMQ's HandleV1 layout (its decoder reads ours), and refusals by their
remark before anything is looked up."""

from __future__ import annotations

import base64

import pytest

from rocketspark.grpcv2.recall import RecallHandle, recall
from rocketspark.grpcv2.stubs import definition_pb2 as pb
from rocketspark.grpcv2.translate import Refused

NOW_MS = 1_795_000_000_000
HANDLE = RecallHandle("orders", "broker-a", NOW_MS + 60_000, "0A0B0C", 42)


def test_a_handle_round_trips_and_reads_as_rocketmqs_handle_v1() -> None:
    text = HANDLE.encode()
    assert RecallHandle.decode(text) == HANDLE
    fields = base64.urlsafe_b64decode(text).decode().split(" ")
    assert fields[:5] == ["v1", "orders", "broker-a", str(NOW_MS + 60_000), "0A0B0C"]  # RocketMQ's order


@pytest.mark.parametrize("text", ["", "not base64 at all!", base64.urlsafe_b64encode(b"v2 a b 1 c 2").decode()])
def test_what_is_no_handle_decodes_to_none(text: str) -> None:
    assert RecallHandle.decode(text) is None


def refused(topic: str, text: str) -> Refused:
    with pytest.raises(Refused) as caught:
        recall(None, topic, text, now_ms=NOW_MS)  # type: ignore[arg-type]  # refused before the delay is used
    assert caught.value.v2_code == pb.Code.INTERNAL_SERVER_ERROR  # what RocketMQ's proxy answers
    return caught.value


def test_a_recall_is_refused_with_rocketmqs_remark_and_a_sentence() -> None:
    assert refused("orders", "garbage").message.startswith("recall handle is invalid: ")
    other = refused("payments", HANDLE.encode()).message
    assert other.startswith("recall failed, topic not match: the handle is of a message of topic 'orders'")
    late = RecallHandle("orders", "broker-a", NOW_MS - 1, "0A0B0C", 42).encode()
    message = refused("orders", late).message
    assert message.startswith("recall failed, timestamp invalid: message 0A0B0C was due at 2026-11-18T")
    assert "can be recalled only before its time" in message
