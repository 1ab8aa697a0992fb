"""Per-batch compression of the message section, through pyarrow's codecs (zstd, lz4 frame).

pyarrow is already a dependency and ships both codecs, so no library is added for them. The
uncompressed size travels in the batch header, so a batch that claims more than the limit is
refused before anything is decompressed, and a section that decompresses to any other size is
refused after.
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
    """The ``size`` bytes ``data`` decompresses to; DecompressionFailed when it does not.

    Read through a stream, which says how much it produced: the codec's one-shot call returns
    a buffer of the size it was asked for whatever it wrote into it, so a damaged section that
    decompresses short came back with an uninitialized tail (different on every call)."""
    if kind not in _CODEC_NAMES:
        raise DecompressionFailed(f"unknown compression {kind} (known: 0 none, 1 zstd, 2 lz4)")
    try:
        out: bytes = pa.CompressedInputStream(pa.BufferReader(data), _CODEC_NAMES[kind]).read(size + 1)
    except (OSError, ValueError, pa.ArrowException) as exc:
        raise DecompressionFailed(f"the {_CODEC_NAMES[kind]} section does not decompress: {exc}") from None
    if len(out) != size:
        what = f"more than {size}" if len(out) > size else str(len(out))
        raise DecompressionFailed(f"the {_CODEC_NAMES[kind]} section decompresses to {what} bytes, not {size}")
    return out
