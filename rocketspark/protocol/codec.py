"""msgpack codecs for request bodies: send batches and small structured bodies.

A send body is a msgpack array: the batch's born time, then one payload per message::

    [born_ms: int, [payload: bin, ...]]

where ``payload`` is already the record payload (see :mod:`rocketspark.protocol.record`):
a fixed header, then body, tag and msgpack keys/properties. The broker validates each
payload's layout and stores it unchanged, so a message is encoded once, by its producer.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import msgpack

from rocketspark.protocol.record import PAYLOAD_HEAD_SIZE, encode_payload, payload_tag, tag_hash
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


def encode_send_batch(payloads: Sequence[bytes]) -> bytes:
    """Body of a SEND_MESSAGE / SEND_BATCH_MESSAGE request, from payloads made by
    ``message_payload`` (the producer encodes each message once, before batching)."""
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


def check_payload(payload: bytes) -> tuple[int, int]:
    """Validate a payload's layout; return its tag hash (for the consume queue) and body size.

    A payload that would not decode for a consumer is refused here, so a broken producer
    cannot poison a queue.
    """
    try:
        tag, body_len = payload_tag(payload, 0, len(payload))
    except ValueError as exc:
        raise MalformedBody(f"message {exc}") from None
    tag_len = 0
    if tag is not None:
        try:
            tag.decode()
        except UnicodeDecodeError:
            raise MalformedBody("message tag is not valid UTF-8") from None
        tag_len = len(tag)
    ext_start = PAYLOAD_HEAD_SIZE + body_len + tag_len
    if ext_start < len(payload):
        try:
            ext = msgpack.unpackb(payload[ext_start:], raw=False)
        except Exception as exc:
            raise MalformedBody(f"message keys/properties are not valid msgpack ({type(exc).__name__})") from exc
        if type(ext) is not list or len(ext) != 2 or type(ext[0]) is not list or type(ext[1]) is not dict:
            raise MalformedBody("message keys/properties must be [keys: array, properties: map]")
    return tag_hash(tag), body_len
