"""Messages and errors between the RocketMQ 5 protocol and ours: the one place each maps.

A v2 message becomes one of ours with the same body, tag and keys. Its ``message_group``
becomes our sharding key (the same group always lands on the same logical queue) and the
``__SHARDINGKEY`` property; a priority message's ``priority`` (RocketMQ 5.4, RIP-80) the
``_SYS_MSG_PRIORITY_`` property, kept only on a message of no other type (a delay, FIFO or
transactional message drops it, as RocketMQ's broker does); the id the client made,
``UNIQ_KEY``, as RocketMQ stores it (it stays the message's id everywhere:
``MessageExt.msg_id``, the key index, ``admin query-msg --id``); its user properties stay as
they are; its born time becomes the record's born timestamp. Back to a v2 consumer, a message's
``message_id`` is its ``msg_id``: the client's ``UNIQ_KEY``, or for a message our own producers
sent, the client id its batch gives it (``codec.ids``); its priority, if it has one, its
``priority``, as a PRIORITY message.

Times are read as the official clients write them (``millis``): the Java client sends seconds
and nanos; the Python client (5.x) writes the number it is given into ``Timestamp.seconds``, and
its documentation gives milliseconds (``delivery_timestamp = now_ms + 60_000``). A ``seconds``
past the year 9999, which no time in seconds can be, is read as milliseconds (every time since
1978 in milliseconds is such a number); whole seconds still read as seconds. The values were
checked at the edge first (:mod:`rocketspark.grpcv2.limits`).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Final

from google.protobuf.timestamp_pb2 import Timestamp

from rocketspark.errors import (
    AuthenticationError,
    FlushDiskTimeoutError,
    FlushSlaveTimeoutError,
    IllegalFilterExpressionError,
    IllegalTopicNameError,
    InvalidParameterError,
    MalformedRequestError,
    MessageTooLargeError,
    NoPermissionError,
    NoRouteInfoError,
    RequestCodeNotSupported,
    RequestTimeoutError,
    RocketSparkError,
    SlaveNotAvailableError,
    SystemBusyError,
    TopicNotExistError,
)
from rocketspark.grpcv2.stubs import definition_pb2 as pb
from rocketspark.protocol.group_topics import DUE_AT_MS, ORIGIN_MESSAGE_ID, RECONSUME_TIME, RETRY_TOPIC
from rocketspark.protocol.properties import (
    DELIVER_MS,
    PRIORITY,
    REAL_TOPIC,
    SHARDING_KEY,
    TRANSACTION_PREPARED,
    UNIQ_KEY,
    priority_of,
)
from rocketspark.protocol.types import Message, MessageExt
from rocketspark.protocol.validation import HELD_TOPIC_PREFIXES

RESERVED: Final = frozenset({UNIQ_KEY, SHARDING_KEY, PRIORITY})
HELD: Final = frozenset({REAL_TOPIC, DELIVER_MS})  # what a held message carries
# What a delay or transaction message keeps when it reaches its topic (RocketMQ 5 keeps the due
# time too): its type, for the metrics' message_type; never a user property.
TYPED: Final = frozenset({DELIVER_MS, TRANSACTION_PREPARED})
# What a group consumer writes on a message it sends back: a producer may not forge them.
SENT_BACK: Final = frozenset({RECONSUME_TIME, RETRY_TOPIC, ORIGIN_MESSAGE_ID, DUE_AT_MS})
FIRST_SECOND: Final = -62_135_596_800  # 0001-01-01T00:00:00Z: the times protobuf and datetime take
LAST_SECOND: Final = 253_402_300_799  # 9999-12-31T23:59:59Z
LAST_MILLI: Final = LAST_SECOND * 1000 + 999


def millis(stamp: Timestamp) -> int:
    """A time in milliseconds since the epoch, read as the official clients write it: a
    ``seconds`` past the year 9999 is the Python client's milliseconds."""
    if stamp.seconds > LAST_SECOND:
        return int(stamp.seconds)
    return int(stamp.seconds) * 1000 + int(stamp.nanos) // 1_000_000


@dataclass(frozen=True, slots=True)
class Incoming:
    message: Message
    message_id: str
    born_ms: int | None
    deliver_at_ms: int | None = None  # a delay message's time
    transactional: bool = False  # a half message, held until its transaction ends
    priority: int | None = None  # a priority message's priority (it picks the queue)


def to_message(v2: pb.Message, max_body_bytes: int) -> Incoming:
    """One of ours from a v2 message, checked: InvalidParameterError / MessageTooLargeError
    name what is wrong."""
    topic = v2.topic.name
    if not topic:
        raise IllegalTopicNameError("the message names no topic (topic.name is empty)")
    if topic.startswith(HELD_TOPIC_PREFIXES):
        raise IllegalTopicNameError(
            f"topic {topic!r} is a system topic (held delay and half messages); send to your own"
        )
    system = v2.system_properties
    body = _body(v2.body, system.body_encoding, max_body_bytes)
    if len(body) > max_body_bytes:
        raise MessageTooLargeError(f"message body of {len(body)} bytes is over the limit of {max_body_bytes} bytes")
    deliver_at = millis(system.delivery_timestamp) if system.HasField("delivery_timestamp") else None
    transactional = system.message_type == pb.MessageType.TRANSACTION
    if transactional and (deliver_at is not None or system.HasField("message_group")):
        raise InvalidParameterError("a transactional message may not have a delivery_timestamp or a message_group")
    clash = sorted((RESERVED | SENT_BACK | HELD) & set(v2.user_properties))
    if clash:
        raise InvalidParameterError(f"user property {clash[0]!r} is reserved; choose another name")
    properties = dict(v2.user_properties)
    group = system.message_group if system.HasField("message_group") else None
    if group:
        properties[SHARDING_KEY] = group
    if system.message_id:
        properties[UNIQ_KEY] = system.message_id
    priority = system.priority if system.HasField("priority") else None
    if group or deliver_at is not None or transactional:
        priority = None  # a message of another type: RocketMQ's broker drops its priority too
    if priority is not None:
        properties[PRIORITY] = str(priority)
    message = Message(
        topic,
        body,
        tags=system.tag if system.HasField("tag") and system.tag else None,
        keys=list(system.keys),
        properties=properties,
        sharding_key=group or None,
    )
    born = millis(system.born_timestamp) if system.HasField("born_timestamp") else None
    return Incoming(message, system.message_id, born or None, deliver_at, transactional, priority)


def _body(data: bytes, encoding: int, max_body_bytes: int) -> bytes:
    """The body as written; a GZIP one is inflated no further than the limit (a small request
    must not unpack into gigabytes)."""
    if encoding != pb.Encoding.GZIP:
        return data
    inflater = zlib.decompressobj(wbits=31)  # gzip framing
    try:
        body = inflater.decompress(data, max_body_bytes + 1)
    except zlib.error as exc:
        raise InvalidParameterError(f"the body says GZIP but does not decompress: {exc}") from None
    if len(body) > max_body_bytes or inflater.unconsumed_tail:
        raise MessageTooLargeError(f"the GZIP body inflates to over the limit of {max_body_bytes} bytes")
    if not inflater.eof:
        raise InvalidParameterError("the body says GZIP but is cut short")
    return body


def to_v2(message: MessageExt, topic: str) -> pb.Message:
    """One of ours as a v2 message under ``topic`` (the topic the consumer asked for), with
    the CRC32 body digest the official clients check; the caller adds the delivery fields."""
    properties = message.properties
    v2 = pb.Message(body=message.body)
    v2.topic.name = topic
    system = v2.system_properties
    system.message_id = message.msg_id  # its UNIQ_KEY, else the id its batch gives it (codec.ids)
    system.body_encoding = pb.Encoding.IDENTITY
    system.body_digest.type = pb.DigestType.CRC32
    system.body_digest.checksum = format(zlib.crc32(message.body), "08X")
    group = properties.get(SHARDING_KEY)
    system.message_type = pb.MessageType.FIFO if group else pb.MessageType.NORMAL
    if group:
        system.message_group = group
    elif (priority := priority_of(properties)) is not None:
        system.message_type = pb.MessageType.PRIORITY
        system.priority = priority
    if message.tags:
        system.tag = message.tags
    system.keys.extend(message.keys)
    system.born_timestamp.FromMilliseconds(message.born_timestamp)
    system.store_timestamp.FromMilliseconds(message.store_timestamp)
    system.born_host = system.store_host = message.broker_name
    system.queue_id = message.queue_id
    system.queue_offset = message.queue_offset
    for key, value in properties.items():
        if key not in RESERVED and key not in HELD and key not in TYPED:
            v2.user_properties[key] = value
    return v2


class Refused(InvalidParameterError):
    """A request the v2 protocol has its own status for (a stale receipt handle, an invisible
    duration out of range, an unknown transaction): ``v2_code`` is that status."""

    def __init__(self, v2_code: int, message: str) -> None:
        super().__init__(message)
        self.v2_code = v2_code


def status(code: int, message: str = "") -> pb.Status:
    return pb.Status(code=code, message=message)  # type: ignore[arg-type]


OK: Final = pb.Code.OK
OK_STATUS: Final = status(OK)  # shared, read only: a message built with it copies it

_CODES: Final[tuple[tuple[type[RocketSparkError], int], ...]] = (  # the most specific class first
    (AuthenticationError, pb.Code.UNAUTHORIZED),
    (NoPermissionError, pb.Code.FORBIDDEN),
    (TopicNotExistError, pb.Code.TOPIC_NOT_FOUND),
    (NoRouteInfoError, pb.Code.TOPIC_NOT_FOUND),
    (IllegalTopicNameError, pb.Code.ILLEGAL_TOPIC),
    (MessageTooLargeError, pb.Code.MESSAGE_BODY_TOO_LARGE),
    (IllegalFilterExpressionError, pb.Code.ILLEGAL_FILTER_EXPRESSION),
    (InvalidParameterError, pb.Code.BAD_REQUEST),
    (MalformedRequestError, pb.Code.BAD_REQUEST),
    (SlaveNotAvailableError, pb.Code.HA_NOT_AVAILABLE),
    (FlushSlaveTimeoutError, pb.Code.SLAVE_PERSISTENCE_TIMEOUT),
    (FlushDiskTimeoutError, pb.Code.MASTER_PERSISTENCE_TIMEOUT),
    (SystemBusyError, pb.Code.TOO_MANY_REQUESTS),
    (RequestTimeoutError, pb.Code.PROXY_TIMEOUT),
    (RequestCodeNotSupported, pb.Code.NOT_IMPLEMENTED),  # a v2 feature not served yet
)


def status_for(exc: RocketSparkError) -> pb.Status:
    """The v2 status a client understands for one of our errors, with our message."""
    if isinstance(exc, Refused):
        return status(exc.v2_code, exc.message)
    for cls, code in _CODES:
        if isinstance(exc, cls):
            return status(code, exc.message)
    return status(pb.Code.INTERNAL_SERVER_ERROR, exc.message)
