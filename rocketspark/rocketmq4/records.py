"""RocketMQ 4.x message bytes: the ``MessageExt`` records of a pull, query or check-back, the
messages of a SEND_BATCH_MESSAGE body, and the properties string. (``research/rocketmq-remoting-4x.md``
section 3; Apache RocketMQ's ``MessageDecoder``.)

A record, big-endian::

     0  i32  TOTALSIZE            the whole record
     4  i32  MAGICCODE            V1 (1-byte topic length): what every 4.x client reads
     8  i32  BODYCRC              CRC32 of the body, & 0x7FFFFFFF
    12  i32  QUEUEID
    16  i32  FLAG                 the producer's flag
    20  i64  QUEUEOFFSET
    28  i64  PHYSICALOFFSET       codec.ids.physical_offset: its batch's log offset plus its place
    36  i32  SYSFLAG              0: bodies are stored and sent uncompressed
    40  i64  BORNTIMESTAMP
    48  4+4  BORNHOST             IPv4 and port (0.0.0.0:0: a producer's address is not kept)
    56  i64  STORETIMESTAMP
    64  4+4  STOREHOST            the storing broker's IPv4 address and port
    72  i32  RECONSUMETIMES
    76  i64  PREPAREDTRANSACTIONOFFSET
    84  i32  BODYLEN, body
     .  i8   TOPICLEN, topic
     .  i16  PROPLEN, properties  ``name \\x01 value``, pairs joined by ``\\x02``

ali-ons reads 4-byte hosts and a 1-byte topic length whatever the magic says, so records are
always V1 with IPv4 hosts; a topic of more than 127 bytes cannot be sent to a 4.x client (its
length byte is signed) and is refused with a message saying so.

A batch body (``MessageDecoder.encodeMessages``), per message: ``TOTALSIZE i32 | MAGICCODE i32
| BODYCRC i32 | FLAG i32 | BODYLEN i32 + body | PROPLEN i16 + properties``.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Final

from rocketspark.errors import InvalidParameterError, MalformedRequestError

MAGIC_V1: Final = -626843481  # 0xDAA320A7
NAME_VALUE: Final = "\x01"
PROPERTY_END: Final = "\x02"
MAX_TOPIC_BYTES: Final = 127
MAX_PROPERTIES_BYTES: Final = 32767  # a signed int16 length

# RocketMQ's MessageSysFlag bits
COMPRESSED: Final = 0x1
TRANSACTION_PREPARED: Final = 0x4
TRANSACTION_MASK: Final = 0xC
BORNHOST_V6: Final = 0x10
STOREHOST_V6: Final = 0x20
COMPRESSION_TYPE_SHIFT: Final = 8
COMPRESSION_TYPE_MASK: Final = 0x700
ZLIB_TYPES: Final = (0, 3)  # 0 means zlib (CompressionType), 3 is zlib

_HEAD: Final = struct.Struct(">iiiiiqqiq4siq4siiqi")  # up to BODYLEN
_BATCH_HEAD: Final = struct.Struct(">iiiii")  # TOTALSIZE, MAGICCODE, BODYCRC, FLAG, BODYLEN
_I16: Final = struct.Struct(">h")
_NO_HOST: Final = bytes(4)


def properties_string(properties: Mapping[str, str]) -> str:
    """RocketMQ's properties string (``messageProperties2String``), without the separator after
    the last pair (as RocketMQ 4.9 writes it: ali-ons would read one as an empty property)."""
    return PROPERTY_END.join(f"{k}{NAME_VALUE}{v}" for k, v in properties.items())


def parse_properties(text: str) -> dict[str, str]:
    """The properties of RocketMQ's string form; a pair without its separator is malformed."""
    properties: dict[str, str] = {}
    for item in text.split(PROPERTY_END):
        if not item:
            continue
        name, sep, value = item.partition(NAME_VALUE)
        if not sep or not name:
            raise MalformedRequestError(
                f"the message properties are not RocketMQ's name\\x01value\\x02 form (at {item[:40]!r})"
            )
        properties[name] = value
    return properties


def inflate(body: bytes, sys_flag: int) -> bytes:
    """A body as its producer meant it: a 4.x client compresses bodies of 4 KiB or more (zlib)
    and says so in ``sysFlag``; the broker stores them inflated, so every consumer (ours, Spark,
    the v2 clients) reads them as sent."""
    if not sys_flag & COMPRESSED:
        return body
    kind = (sys_flag & COMPRESSION_TYPE_MASK) >> COMPRESSION_TYPE_SHIFT
    if kind not in ZLIB_TYPES:
        names = {1: "LZ4", 2: "ZSTD"}
        raise InvalidParameterError(
            f"the message body is compressed with {names.get(kind, f'type {kind}')}; this broker inflates zlib "
            "bodies only (the 4.x clients' default): set the producer's compressType to ZLIB"
        )
    try:
        return zlib.decompress(body)
    except zlib.error as exc:
        raise MalformedRequestError(
            f"the message body says it is zlib-compressed but does not inflate: {exc}"
        ) from None


@dataclass(frozen=True, slots=True)
class SentMessage:
    """One message of a SEND_BATCH_MESSAGE body."""

    flag: int
    body: bytes
    properties: dict[str, str]


def batch_messages(body: bytes) -> Iterator[SentMessage]:
    """The messages of a batch body, checked as they are read (sizes that do not add up are a
    malformed request, never a partial batch stored)."""
    at, end = 0, len(body)
    while at < end:
        if end - at < _BATCH_HEAD.size + 2:
            raise MalformedRequestError(f"the batch body ends inside a message header at byte {at}")
        total, _magic, _crc, flag, body_len = _BATCH_HEAD.unpack_from(body, at)
        start = at + _BATCH_HEAD.size
        if body_len < 0 or total < _BATCH_HEAD.size + 2 or at + total > end or start + body_len + 2 > at + total:
            raise MalformedRequestError(f"the batch body's message at byte {at} has sizes that do not add up")
        payload = body[start : start + body_len]
        (prop_len,) = _I16.unpack_from(body, start + body_len)
        prop_at = start + body_len + 2
        if prop_len < 0 or prop_at + prop_len != at + total:
            raise MalformedRequestError(f"the batch body's message at byte {at} has sizes that do not add up")
        try:
            text = body[prop_at : prop_at + prop_len].decode()
        except UnicodeDecodeError:
            raise MalformedRequestError(
                f"the batch body's message at byte {at} has properties that are not UTF-8"
            ) from None
        yield SentMessage(flag, payload, parse_properties(text))
        at += total


def encode_batch_message(body: bytes, properties: Mapping[str, str], flag: int = 0) -> bytes:
    """One message of a batch body (what Java's ``MessageBatch.encode`` writes; for tests and
    the benchmark's own 4.x producer)."""
    props = properties_string(properties).encode()
    total = _BATCH_HEAD.size + len(body) + 2 + len(props)
    return b"".join((_BATCH_HEAD.pack(total, 0, 0, flag, len(body)), body, _I16.pack(len(props)), props))


@dataclass(frozen=True, slots=True)
class Host:
    """A socket address as a record holds it: 4 address bytes and a port."""

    ip: bytes
    port: int

    @classmethod
    def parse(cls, address: str) -> Host:
        """``host:port`` of a broker: its address must be IPv4 (4.x clients read 4 bytes)."""
        host, _, port = address.rpartition(":")
        try:
            ip = bytes(int(part) for part in host.split("."))
            if len(ip) != 4:
                raise ValueError(host)
            return cls(ip, int(port))
        except ValueError:
            raise InvalidParameterError(
                f"broker address {address!r} is not IPv4 host:port: RocketMQ 4.x clients read a stored message's "
                "host as 4 bytes; give the broker an IPv4 advertised_host"
            ) from None


def host_of(store_host: bytes) -> Host:
    """A broker's ``codec.ids.store_host`` (packed address and port) as a record holds it."""
    if len(store_host) != 8:
        raise InvalidParameterError(
            "a message stored on a broker with an IPv6 address: RocketMQ 4.x clients read a stored message's host "
            "as 4 bytes; give the broker an IPv4 advertised_host"
        )
    return Host(store_host[:4], int.from_bytes(store_host[4:], "big"))


NO_HOST: Final = Host(_NO_HOST, 0)


@dataclass(frozen=True, slots=True)
class Record:
    """What a 4.x consumer is told of one stored message."""

    topic: str
    queue_id: int
    queue_offset: int
    physical_offset: int
    body: bytes
    properties: Mapping[str, str]
    born_ms: int
    store_ms: int
    store_host: Host
    reconsume_times: int = 0
    flag: int = 0
    sys_flag: int = 0


def encode(record: Record) -> bytes:
    """One MessageExt record (V1)."""
    topic = record.topic.encode()
    if len(topic) > MAX_TOPIC_BYTES:
        raise InvalidParameterError(
            f"topic {record.topic!r} has {len(topic)} bytes; a RocketMQ 4.x client reads at most "
            f"{MAX_TOPIC_BYTES} (a signed byte): read it with our Consumer or a RocketMQ 5 client"
        )
    props = properties_string(record.properties).encode()
    if len(props) > MAX_PROPERTIES_BYTES:
        raise InvalidParameterError(
            f"a message of {record.topic!r} at offset {record.queue_offset} has {len(props)} bytes of properties; "
            f"a RocketMQ 4.x client reads at most {MAX_PROPERTIES_BYTES}"
        )
    body = record.body
    total = _HEAD.size + len(body) + 1 + len(topic) + 2 + len(props)
    head = _HEAD.pack(
        total,
        MAGIC_V1,
        zlib.crc32(body) & 0x7FFFFFFF,
        record.queue_id,
        record.flag,
        record.queue_offset,
        record.physical_offset,
        record.sys_flag,
        record.born_ms,
        NO_HOST.ip,
        NO_HOST.port,
        record.store_ms,
        record.store_host.ip,
        record.store_host.port,
        record.reconsume_times,
        0,
        len(body),
    )
    return b"".join((head, body, bytes((len(topic),)), topic, _I16.pack(len(props)), props))


def decode(data: bytes) -> Iterator[Record]:
    """The records of a pull body (the inverse of ``encode``: tests and the benchmark read
    with it what a 4.x client would)."""
    at = 0
    while at < len(data):
        (total, _magic, _crc, queue_id, flag, queue_offset, physical, sys_flag, born, _bh, _bp, stored, sh, sp,
         reconsume, _prepared, body_len) = _HEAD.unpack_from(data, at)  # fmt: skip
        body_at = at + _HEAD.size
        body = data[body_at : body_at + body_len]
        topic_len = data[body_at + body_len]
        topic_at = body_at + body_len + 1
        topic = data[topic_at : topic_at + topic_len].decode()
        (prop_len,) = _I16.unpack_from(data, topic_at + topic_len)
        props_at = topic_at + topic_len + 2
        properties = parse_properties(data[props_at : props_at + prop_len].decode())
        yield Record(
            topic, queue_id, queue_offset, physical, body, properties, born, stored, Host(sh, sp), reconsume, flag,
            sys_flag,
        )  # fmt: skip
        at += total
