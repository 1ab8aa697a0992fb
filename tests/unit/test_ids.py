"""Offset ids in RocketMQ's layout (MessageDecoder.createMessageId), round trip and refusals."""

from __future__ import annotations

import pytest

from rocketspark.codec import ids
from rocketspark.errors import InvalidParameterError


def test_offset_id_is_rocketmqs_layout() -> None:
    text = ids.offset_msg_id(ids.host_bytes("10.0.0.1"), 10911, 5000, 3)
    # ip 0A000001, port 00002A9F, physical offset 5000 + 3
    assert text == "0A000001" + "00002A9F" + f"{5003:016X}"
    parsed = ids.parse_offset_msg_id(text.lower())
    assert parsed == ids.OffsetMsgId("10.0.0.1", 10911, 5003)
    assert parsed.address == "10.0.0.1:10911"


def test_ipv6_offset_id() -> None:
    text = ids.offset_msg_id(ids.host_bytes("::1"), 9876, 1 << 40, 7)
    assert len(text) == ids.V6_HEX
    parsed = ids.parse_offset_msg_id(text)
    assert (parsed.address, parsed.physical) == ("[::1]:9876", (1 << 40) + 7)


@pytest.mark.parametrize("text", ["", "XYZ", "0A000001" * 3, "0A000001" + "00000000" + "0" * 16])
def test_not_an_offset_id(text: str) -> None:
    with pytest.raises(InvalidParameterError, match="not an offset message id"):
        ids.parse_offset_msg_id(text)


def test_a_physical_offset_lies_in_its_batchs_bytes() -> None:
    physical = ids.physical_offset(1000, 9)
    assert ids.covers(1000, 10, physical) and not ids.covers(1000, 9, physical)
    assert not ids.covers(1010, 50, physical)
