"""What both servers run the same way: periodic background work, on their event loop
(``every_ms_on_loop``) or, for a blocking step, in a worker thread (``every_s_in_thread``), and
running until SIGTERM/SIGINT (``serve_until_signalled``)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import inspect
import logging
import signal
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

log = logging.getLogger(__name__)


async def every_ms_on_loop(
    interval_ms: int, what: str, action: Callable[[], object], logger: logging.Logger = log
) -> None:
    """Run ``action`` (sync or async) on the event loop every ``interval_ms`` until cancelled
    (a blocking step is :func:`every_s_in_thread`'s). A failing round
    is logged with its traceback and the next one runs: one bad round must not end the work."""
    while True:
        await asyncio.sleep(interval_ms / 1000)
        try:
            result = action()
            if inspect.isawaitable(result):
                await result
        except Exception:
            logger.exception("periodic %s failed", what)


async def every_s_in_thread(
    interval_s: float,
    step: Callable[[], object],
    what: str,
    logger: logging.Logger = log,
    executor: concurrent.futures.Executor | None = None,
) -> None:
    """Call ``step`` (blocking: it calls the cluster) in a worker thread of ``executor`` every
    ``interval_s`` until cancelled. A failure is logged once (and again only when it changes)
    and the next round tries again."""
    failing = ""
    loop = asyncio.get_running_loop()
    while True:
        try:
            await loop.run_in_executor(executor, step)
            if failing:
                logger.info("%s works again", what)
            failing = ""
        except Exception as exc:  # a background loop outlives a bad round
            text = f"{type(exc).__name__}: {exc}"
            if text != failing:
                logger.warning("%s failed (%s); trying again", what, text)
            failing = text
        await asyncio.sleep(interval_s)


def signal_event() -> asyncio.Event:
    """An event set by SIGTERM or SIGINT (in the main thread; elsewhere it is never set)."""
    event = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, event.set)
    return event


class _Addressed(Protocol):
    address: str


S = TypeVar("S", bound=_Addressed)
L = TypeVar("L")  # the listener (rocketspark.remoting.listener.Listener)
Tasks = list[asyncio.Task[None]]


async def serve_until_signalled(
    server: L,
    owner: S,
    start: Callable[[L, S], Awaitable[Tasks]],
    stop: Callable[[L, S, Tasks], Awaitable[None]],
    *,
    ready: Callable[[str], None] | None = None,
) -> None:
    """Start, announce ``owner.address`` to ``ready``, run until SIGTERM/SIGINT, then stop.

    The signal handlers go in before the readiness line: a signal sent right after it counts.
    """
    stop_requested = signal_event()
    tasks = await start(server, owner)
    if ready is not None:
        ready(owner.address)
    await stop_requested.wait()
    await stop(server, owner, tasks)
