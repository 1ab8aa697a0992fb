"""Message ids: the one place their byte layouts live.

A message has two ids, as in RocketMQ:

- its **client id** (RocketMQ's ``UNIQ_KEY`` property, the ``msgId`` a send returns), given by
  the producer;
- its **offset id** (RocketMQ's ``offsetMsgId``), naming where the broker stored it: uppercase
  hex of the storing broker's IPv4 address (4 bytes, or 16 for IPv6), its port (int32) and
  the message's *physical offset* (int64), exactly RocketMQ's ``MessageDecoder.createMessageId``
  layout, so RocketMQ's tools decode it (``mqadmin queryMsgById`` connects to the address in it
  and asks for the offset).

**Client ids of our producers** (the Producer, the Spark sink, a broker minting for a send that
brought none) are RocketMQ Java's ``MessageClientIDSetter`` layout, 16 bytes as 32 uppercase hex
digits::

    0  ip4      u8[4]   the minting host's IPv4 address
    4  pid      u16     the minting process (its low 16 bits)
    6  instance u32     random per minter (Java: its class loader's hash)
   10  time     u32     ms since the start of the current month (UTC), when minted
   14  counter  u16     counts up

A batch's ids are consecutive: message ``i``'s id is the first one plus ``i``, as a 128-bit
integer (the counter carries into the time field, as 65,536 ids a millisecond would). So a batch
record carries only its first id (``layout``'s header) and every other one follows from it,
with no per-message bytes or work. A minter (``IdMinter``) hands out ranges: ``next(count)``
is the first of ``count`` ids no other call of it returns. A message whose properties carry a
``UNIQ_KEY`` of its own (an official client's, a 4.x client's: any form, an opaque string)
keeps that one; a record of the previous format (version 2) carries no first id, and its
messages' ids fall back to their offset ids, as RocketMQ's ``getMsgId`` does without
``UNIQ_KEY``.

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

import calendar
import functools
import ipaddress
import os
import random
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, NamedTuple

from rocketspark.errors import InvalidParameterError

MIN_BYTES_PER_MESSAGE: Final = 1  # a batch record has at least as many bytes as messages
_PORT_OFFSET: Final = struct.Struct(">iq")
_PORT: Final = struct.Struct(">i")
V4_HEX: Final = 32  # 4 + 4 + 8 bytes
V6_HEX: Final = 56  # 16 + 4 + 8 bytes

CLIENT_ID_BYTES: Final = 16  # ip4, pid, instance, time, counter
CLIENT_ID_HEX: Final = 2 * CLIENT_ID_BYTES
NO_ID: Final = bytes(CLIENT_ID_BYTES)  # a record's first id when its producer gave none
_ID_MASK: Final = (1 << (8 * CLIENT_ID_BYTES)) - 1
_SEQ_BITS: Final = 48  # time and counter: what a minter counts in
_SEQ_MASK: Final = (1 << _SEQ_BITS) - 1
_HEX_DIGITS: Final = frozenset("0123456789abcdefABCDEF")


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

    @property
    def store_host(self) -> bytes:
        """The id's first bytes, the broker's packed address and port: what ``store_host``
        gives for the broker that stored the message."""
        return ipaddress.ip_address(self.host).packed + _PORT.pack(self.port)


def host_bytes(host: str) -> bytes:
    """The packed address of a broker's (literal) host; ValueError for a name."""
    return ipaddress.ip_address(host).packed


def offset_msg_id(host: bytes, port: int, commitlog_offset: int, index: int) -> str:
    """The offset id of the ``index``-th message of the batch at ``commitlog_offset`` on the
    broker listening at ``host`` (packed, ``host_bytes``) and ``port``."""
    return (host + _PORT_OFFSET.pack(port, physical_offset(commitlog_offset, index))).hex().upper()


def is_offset_msg_id(text: str) -> bool:
    """Whether ``text`` has the shape of an offset id (it may still name no broker of ours)."""
    return len(text) in (V4_HEX, V6_HEX) and _HEX_DIGITS.issuperset(text)


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


def store_host(address: str) -> bytes:
    """The packed IP address and port (int32) of a broker's ``host:port`` (``[v6]:port``), as
    offset ids begin: 8 bytes, or 20 for IPv6. A host name is resolved (once per address); one
    that does not resolve gives 0.0.0.0, and no address at all (a broker not yet listening)
    0.0.0.0:0 (the id then names no reachable broker)."""
    return _store_host(address)


@functools.lru_cache(maxsize=1024)
def _store_host(address: str) -> bytes:
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    if not port.isdigit():
        return bytes(8)
    try:
        ip = ipaddress.ip_address(host).packed
    except ValueError:
        ip = _resolve(host)
    return ip + _PORT.pack(int(port))


def _resolve(host: str) -> bytes:
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except OSError:
        return bytes(4)
    v4 = [i[4][0] for i in infos if i[0] == socket.AF_INET]
    return ipaddress.ip_address(str(v4[0] if v4 else infos[0][4][0])).packed if infos else bytes(4)


def offset_msg_id_at(host: bytes, physical: int) -> str:
    """The offset id of the message at ``physical`` (``physical_offset``) on the broker whose
    ``store_host`` is ``host``."""
    return (host + physical.to_bytes(8, "big")).hex().upper()


# -- client ids ------------------------------------------------------------------------------


def client_id_at(first: bytes, index: int) -> str:
    """The client id of message ``index`` of a batch whose first id is ``first`` (16 bytes):
    ``first + index`` as a 128-bit integer, in 32 uppercase hex digits."""
    return f"{(int.from_bytes(first, 'big') + index) & _ID_MASK:032X}"


def client_id_hex(raw: bytes) -> str:
    """A client id's 16 bytes as the 32 hex digits it is shown and sent as."""
    return raw.hex().upper()


def parse_client_id(text: str) -> bytes | None:
    """The 16 bytes of a client id in our producers' layout (32 hex digits, either case); None
    for any other string (an official client's id, say: those are found as strings)."""
    text = text.strip()
    if len(text) != CLIENT_ID_HEX or not _HEX_DIGITS.issuperset(text):
        return None
    return bytes.fromhex(text)


class BatchIds(NamedTuple):
    """What the messages of one stored batch need for their ids: the batch's first client id
    (None for a record of the previous format: its messages have none) and the ``store_host``
    of the broker it was read from."""

    first: bytes | None
    host: bytes

    def client_id(self, index: int) -> str | None:
        """Message ``index``'s client id from the batch's first (not its own ``UNIQ_KEY``)."""
        return None if self.first is None else client_id_at(self.first, index)

    def offset_msg_id(self, commitlog_offset: int, index: int) -> str:
        return offset_msg_id_at(self.host, physical_offset(commitlog_offset, index))


def month_span_s(now_s: float) -> tuple[int, int]:
    """The start of ``now_s``'s month (UTC) and of the next one, in seconds since the epoch."""
    t = time.gmtime(now_s)
    year, month = (t.tm_year, t.tm_mon + 1) if t.tm_mon < 12 else (t.tm_year + 1, 1)
    return calendar.timegm((t.tm_year, t.tm_mon, 1, 0, 0, 0)), calendar.timegm((year, month, 1, 0, 0, 0))


class IdMinter:
    """Hands out client ids in our producers' layout, ``count`` consecutive ones at a time.

    ``next(count)`` returns the first of ``count`` ids (16 bytes) that no other call returns: the
    time and counter fields count on from the last range, and jump to the current time when
    it is ahead (so ids sort by when they were minted, and a restarted process with the same
    low 16 bits of its pid, and by chance the same instance number, still starts after the old
    one's). Thread-safe; one minter per process serves every producer in it (``mint``)."""

    def __init__(
        self,
        ip: bytes | None = None,
        *,
        pid: int | None = None,
        instance: int | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        ip = local_ipv4() if ip is None else ip
        if len(ip) != 4:
            raise ValueError(f"a client id holds an IPv4 address (4 bytes), not {len(ip)} bytes")
        pid = os.getpid() if pid is None else pid
        instance = random.getrandbits(32) if instance is None else instance
        self.prefix = ip + (pid & 0xFFFF).to_bytes(2, "big") + (instance & 0xFFFFFFFF).to_bytes(4, "big")
        self._clock = clock
        self._lock = threading.Lock()
        self._month = (0, 0)  # the month the time field counts from: its start and the next one's, s
        self._next = 0  # the time and counter fields of the next id

    def next(self, count: int = 1) -> bytes:
        """The first of ``count`` consecutive ids, reserved for the caller."""
        if count < 1:
            raise ValueError(f"ids are minted for at least one message, not {count}")
        now = self._clock()
        with self._lock:
            start, end = self._month
            if not start <= now < end:  # the time field counts from each month's start (RocketMQ's)
                self._month = start, end = month_span_s(now)
                self._next = 0
            seq = max(self._next, int((now - start) * 1000) << 16) & _SEQ_MASK
            self._next = seq + count
        return self.prefix + seq.to_bytes(6, "big")


@functools.cache
def local_ipv4() -> bytes:
    """This host's IPv4 address as other hosts see it (the interface of the default route,
    found without sending anything), else 127.0.0.1."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(("10.254.254.254", 1))  # a UDP connect only picks the route
            return ipaddress.ip_address(probe.getsockname()[0]).packed
    except OSError:
        return bytes([127, 0, 0, 1])


_minter: IdMinter | None = None
_minter_lock = threading.Lock()


def mint(count: int = 1) -> bytes:
    """The first of ``count`` consecutive client ids from this process's minter."""
    global _minter
    minter = _minter
    if minter is None:
        with _minter_lock:
            minter = _minter = _minter or IdMinter()
    return minter.next(count)


def _forget_minter() -> None:
    """A forked child (Spark's Python workers are forked) mints under its own pid and instance
    (and may have been forked while another thread held the lock)."""
    global _minter, _minter_lock
    _minter, _minter_lock = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_minter)
