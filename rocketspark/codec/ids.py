"""Message ids: the one place their byte layouts live.

A message has two ids, as in RocketMQ:

- its **client id** (RocketMQ's ``UNIQ_KEY`` property, the ``msgId`` a send returns), given by
  the producer;
- its **offset id** (RocketMQ's ``offsetMsgId``), naming where the broker stored it: uppercase
  hex of the storing broker's IPv4 address (4 bytes, or 16 for IPv6), its port (int32) and
  the message's *physical offset* (int64), exactly RocketMQ's ``MessageDecoder.createMessageId``
  layout, so RocketMQ's tools decode it (``mqadmin queryMsgById`` connects to the address in it
  and asks for the offset).

RocketMQ stores one message per log entry, so its physical offset is the entry's log offset. We
store batches: a message's physical offset is its batch's log offset plus its place in the
batch. That stays inside the batch's own bytes, because the broker refuses a batch record
smaller than its message count (``MIN_BYTES_PER_MESSAGE``; no real batch is: every message
takes at least 13 bytes of offsets and flags before compression, and the producer does not
compress a batch past that), so the batch holding a physical offset is the one whose bytes
cover it: a binary search over a queue's consume queue, by log position. It is not a bit
field (batch offset shifted, index below): 4.x clients in JavaScript (ali-ons) hold the
offset as a double, exact only below 2^53, and send it back (CONSUMER_SEND_MSG_BACK); a sum
stays as small as the log. An id is computable from where the message is, so never stored.
"""

from __future__ import annotations

import ipaddress
import struct
from dataclasses import dataclass
from typing import Final

from rocketspark.errors import InvalidParameterError

MIN_BYTES_PER_MESSAGE: Final = 1  # a batch record has at least as many bytes as messages
_PORT_OFFSET: Final = struct.Struct(">iq")
V4_HEX: Final = 32  # 4 + 4 + 8 bytes
V6_HEX: Final = 56  # 16 + 4 + 8 bytes


def physical_offset(commitlog_offset: int, index: int) -> int:
    """The int64 RocketMQ clients see as a message's commit-log offset (``PHYSICALOFFSET``):
    inside its batch's bytes, ``[commitlog_offset, commitlog_offset + record size)``."""
    return commitlog_offset + index


def covers(commitlog_offset: int, record_size: int, physical: int) -> bool:
    """Whether the batch record at ``commitlog_offset`` of ``record_size`` bytes holds the
    message at ``physical`` (its index is then ``physical - commitlog_offset``)."""
    return commitlog_offset <= physical < commitlog_offset + record_size


@dataclass(frozen=True, slots=True)
class OffsetMsgId:
    """What an offset id says: the storing broker's address and the message's physical offset
    in its log (``physical_offset``)."""

    host: str
    port: int
    physical: int

    @property
    def address(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def host_bytes(host: str) -> bytes:
    """The packed address of a broker's (literal) host; ValueError for a name."""
    return ipaddress.ip_address(host).packed


def offset_msg_id(host: bytes, port: int, commitlog_offset: int, index: int) -> str:
    """The offset id of the ``index``-th message of the batch at ``commitlog_offset`` on the
    broker listening at ``host`` (packed, ``host_bytes``) and ``port``."""
    return (host + _PORT_OFFSET.pack(port, physical_offset(commitlog_offset, index))).hex().upper()


def is_offset_msg_id(text: str) -> bool:
    """Whether ``text`` has the shape of an offset id (it may still name no broker of ours)."""
    return len(text) in (V4_HEX, V6_HEX) and all(c in "0123456789abcdefABCDEF" for c in text)


def parse_offset_msg_id(text: str) -> OffsetMsgId:
    """What an offset id names; InvalidParameterError when ``text`` is not one."""
    text = text.strip()
    if not is_offset_msg_id(text):
        raise InvalidParameterError(
            f"{text!r} is not an offset message id (32 hexadecimal digits: a broker's IPv4 address, port and "
            "log position, or 56 with an IPv6 address)"
        )
    raw = bytes.fromhex(text)
    ip = ipaddress.ip_address(raw[:-12])
    port, physical = _PORT_OFFSET.unpack(raw[-12:])
    if not 0 < port < 65536 or physical < 0:
        raise InvalidParameterError(
            f"{text!r} is not an offset message id: port {port} or position {physical} is impossible"
        )
    return OffsetMsgId(str(ip), port, physical)
