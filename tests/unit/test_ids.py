"""Offset ids in RocketMQ's layout (MessageDecoder.createMessageId), round trip and refusals."""

from __future__ import annotations

import pytest

from rocketspark.codec import ids
from rocketspark.errors import InvalidParameterError


def test_offset_id_is_rocketmqs_layout() -> None:
    text = ids.offset_msg_id(ids.host_bytes("10.0.0.1"), 10911, 5, 3)
    # ip 0A000001, port 00002A9F, physical offset 5 << 20 | 3
    assert text == "0A000001" + "00002A9F" + f"{(5 << 20) | 3:016X}"
    parsed = ids.parse_offset_msg_id(text.lower())
    assert parsed == ids.OffsetMsgId("10.0.0.1", 10911, 5, 3)
    assert parsed.address == "10.0.0.1:10911" and parsed.physical == (5 << 20) | 3


def test_ipv6_offset_id() -> None:
    text = ids.offset_msg_id(ids.host_bytes("::1"), 9876, 1 << 40, ids.MAX_BATCH_COUNT - 1)
    assert len(text) == ids.V6_HEX
    parsed = ids.parse_offset_msg_id(text)
    assert (parsed.address, parsed.commitlog_offset, parsed.index) == ("[::1]:9876", 1 << 40, ids.MAX_BATCH_COUNT - 1)


@pytest.mark.parametrize("text", ["", "XYZ", "0A000001" * 3, "0A000001" + "00000000" + "0" * 16])
def test_not_an_offset_id(text: str) -> None:
    with pytest.raises(InvalidParameterError, match="not an offset message id"):
        ids.parse_offset_msg_id(text)


def test_split_physical() -> None:
    assert ids.split_physical(ids.physical_offset(123456, 789)) == (123456, 789)
    with pytest.raises(InvalidParameterError, match="negative"):
        ids.split_physical(-1)
