"""msgpack codecs for request bodies: send batches and small structured bodies.

A send body is a msgpack array: the batch's born time, then one payload per message::

    [born_ms: int, [payload: bin, ...]]

where ``payload`` is already the record payload (see :mod:`rocketspark.protocol.record`):
msgpack ``[body, tags, keys, properties]``. The broker validates each payload's shape and
stores it unchanged, so a message is encoded once, by its producer.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import msgpack

from rocketspark.protocol.record import encode_payload
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
    """Validate a record payload's shape; return its tag (for the tag hash) and body size."""
    try:
        fields = msgpack.unpackb(payload, raw=False)
    except Exception as exc:
        raise MalformedBody(f"message payload is not valid msgpack ({type(exc).__name__})") from exc
    if type(fields) is not list or len(fields) != 4:
        raise MalformedBody("message payload must be [body, tags, keys, properties]")
    body, tags, keys, props = fields
    if type(body) is not bytes or not (tags is None or type(tags) is str):
        raise MalformedBody("message body must be bytes and tags a string or nil")
    if not (keys is None or type(keys) is list) or not (props is None or type(props) is dict):
        raise MalformedBody("message keys must be an array (or nil) and properties a map (or nil)")
    return tags, len(body)
