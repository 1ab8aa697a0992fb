"""msgpack codecs for small structured request and response bodies.

A send's body is not msgpack: it is one batch record, as :mod:`rocketspark.codec` builds it.
"""

from __future__ import annotations

from typing import Any

import msgpack

from rocketspark.protocol.packing import packer


class MalformedBody(ValueError):
    """A request body does not have the shape its request code requires."""


def pack(value: Any) -> bytes:
    packed: bytes = packer().pack(value)  # this thread's packer (protocol.packing), not a new one a call
    return packed


def unpack(data: bytes) -> Any:
    try:
        return msgpack.unpackb(data, raw=False, strict_map_key=False)
    except Exception as exc:
        raise MalformedBody(f"body is not valid msgpack ({type(exc).__name__}: {exc})") from exc
