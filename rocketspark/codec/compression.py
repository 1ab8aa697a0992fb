"""Per-batch compression of the message section, through pyarrow's codecs (zstd, lz4 frame).

pyarrow is already a dependency and ships both codecs, so no library is added for them. The
uncompressed size travels in the batch header, so a reader allocates once and a batch that
claims more than the limit is refused before anything is decompressed.
"""

from __future__ import annotations

from functools import cache
from typing import Final

import pyarrow as pa

from rocketspark.codec.layout import LZ4, NONE, ZSTD

_CODEC_NAMES: Final = {ZSTD: "zstd", LZ4: "lz4"}


class DecompressionFailed(ValueError):
    """A compressed message section does not decompress to the size its header names."""


@cache
def _codec(kind: int) -> pa.Codec:
    return pa.Codec(_CODEC_NAMES[kind])


def compress(kind: int, section: bytes) -> bytes:
    if kind == NONE:
        return section
    packed: bytes = _codec(kind).compress(section, asbytes=True)
    return packed


def decompress(kind: int, data: bytes | memoryview, size: int) -> bytes:
    """The ``size`` bytes ``data`` decompresses to; DecompressionFailed when it does not."""
    if kind not in _CODEC_NAMES:
        raise DecompressionFailed(f"unknown compression {kind} (known: 0 none, 1 zstd, 2 lz4)")
    try:
        out: bytes = _codec(kind).decompress(data, decompressed_size=size, asbytes=True)
    except (OSError, ValueError, pa.ArrowException) as exc:
        raise DecompressionFailed(f"the {_CODEC_NAMES[kind]} section does not decompress: {exc}") from None
    if len(out) != size:
        raise DecompressionFailed(f"the {_CODEC_NAMES[kind]} section decompresses to {len(out)} bytes, not {size}")
    return out
