"""The event loop servers run on: uvloop where it is installed (Linux, macOS), else asyncio's.

uvloop runs the remoting wire's per-request work (parsing a frame, a task, a write) in about a
third of the time of the default loop on this machine; grpc.aio (the v2 endpoint) runs on it
as well. Everything else is plain asyncio, so a platform without uvloop only runs slower.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

try:
    import uvloop

    HAVE_UVLOOP = True
except ImportError:  # pragma: no cover - every supported Linux has it
    HAVE_UVLOOP = False


def new_event_loop() -> asyncio.AbstractEventLoop:
    return uvloop.new_event_loop() if HAVE_UVLOOP else asyncio.new_event_loop()


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run`` on a loop of ``new_event_loop``."""
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        return runner.run(main)


def name() -> str:
    return "uvloop" if HAVE_UVLOOP else "asyncio"
