"""The msgpack packer of the calling thread: frame headers, and a message's keys and properties.

``msgpack.packb`` makes a Packer, and its 256 KiB buffer, on every call: about half of what
packing a send's header costs. A Packer writes into a buffer of its own, so no two threads may
share one (msgpack's pure-Python Packer, which it uses where its C extension is missing,
switches threads in the middle of a pack; so can a garbage collection the C one sets off).
Each thread gets its own on first use, with a small buffer that grows as a header needs.
"""

from __future__ import annotations

import threading
from typing import Any, Final

import msgpack

INITIAL_BYTES: Final = 4096  # a packer's first buffer; a larger header grows it
_LOCAL: Final = threading.local()


def packer() -> Any:
    """This thread's packer (``use_bin_type``: bytes stay bytes, str is UTF-8)."""
    try:
        return _LOCAL.packer
    except AttributeError:
        made = _LOCAL.packer = msgpack.Packer(use_bin_type=True, buf_size=INITIAL_BYTES)
        return made
