"""msgpack codecs for small structured request and response bodies.

A send's body is not msgpack: it is one batch record, as :mod:`rocketspark.codec` builds it.
"""

from __future__ import annotations

from typing import Any

import msgpack


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
