"""msgpack codecs for request bodies: send batches and small structured bodies.

A send body is a msgpack array: the batch's born time, then one payload per message::

    [born_ms: int, [payload: bin, ...]]

where ``payload`` is already the record payload (see :mod:`rocketspark.protocol.record`):
msgpack ``[body, tags, keys, properties]``. The broker validates each payload's shape and
stores it unchanged, so a message is encoded once, by its producer.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Sequence
from typing import Any

import msgpack

from rocketspark.protocol.record import NO_TAG, PAYLOAD_HEAD, PAYLOAD_HEAD_SIZE, encode_payload
from rocketspark.protocol.types import Message


class MalformedBody(ValueError):
    """A request body does not have the shape its request code requires."""


def pack(value: Any) -> bytes:
    packed: bytes = msgpack.packb(value, use_bin_type=True)
    return packed


def unpack(data: bytes) -> Any:
    try:
        return msgpack.unpackb(data, raw=False, strict_map_key=False)
    except Exception as exc:
        raise MalformedBody(f"body is not valid msgpack ({type(exc).__name__}: {exc})") from exc


def message_payload(message: Message) -> bytes:
    return encode_payload(message.body, message.tags, message.keys, message.properties)


def encode_send_batch(messages: Sequence[Message], payloads: Sequence[bytes] | None = None) -> bytes:
    """Body of a SEND_MESSAGE / SEND_BATCH_MESSAGE request."""
    if payloads is None:
        payloads = [message_payload(m) for m in messages]
    packed: bytes = msgpack.packb([int(time.time() * 1000), payloads], use_bin_type=True)
    return packed


def decode_send_batch(body: bytes) -> tuple[int, list[bytes]]:
    """Parse a send body into its born time and payloads, checking the outer shape only."""
    decoded = unpack(body)
    if type(decoded) is not list or len(decoded) != 2:
        raise MalformedBody("send body must be [born_ms, [payload, ...]]")
    born, payloads = decoded
    if type(born) is not int or type(payloads) is not list or not payloads:
        raise MalformedBody("send body must be [born_ms: int, [payload: bin, ...]] with at least one payload")
    for payload in payloads:
        if type(payload) is not bytes:
            raise MalformedBody("each message payload in a send body must be bin")
    return born, payloads


def payload_tags(payload: bytes) -> tuple[str | None, int]:
    """Validate a payload's layout; return its tag (for the tag hash) and body size.

    A payload that would not decode for a consumer is refused here, so a broken producer
    cannot poison a queue.
    """
    try:
        body_len, tag_len, ext_len = PAYLOAD_HEAD.unpack_from(payload, 0)
    except struct.error:
        raise MalformedBody("message payload is shorter than its 10-byte header") from None
    tag_bytes = 0 if tag_len == NO_TAG else tag_len
    if PAYLOAD_HEAD_SIZE + body_len + tag_bytes + ext_len != len(payload):
        raise MalformedBody("message payload lengths do not add up to its size")
    tag = None
    start = PAYLOAD_HEAD_SIZE + body_len
    if tag_len != NO_TAG:
        try:
            tag = payload[start : start + tag_len].decode()
        except UnicodeDecodeError:
            raise MalformedBody("message tag is not valid UTF-8") from None
    if ext_len:
        try:
            ext = msgpack.unpackb(payload[start + tag_bytes :], raw=False)
        except Exception as exc:
            raise MalformedBody(f"message keys/properties are not valid msgpack ({type(exc).__name__})") from exc
        if type(ext) is not list or len(ext) != 2 or type(ext[0]) is not list or type(ext[1]) is not dict:
            raise MalformedBody("message keys/properties must be [keys: array, properties: map]")
    return tag, body_len
