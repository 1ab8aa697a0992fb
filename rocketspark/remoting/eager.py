"""Starting a coroutine at once, in the caller's turn of the event loop: a request that never
waits is served without a task's cost (Python 3.12's eager task factory, by hand, for 3.11)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any


def eagerly(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None] | None:
    """Run ``coro`` now, up to its first wait; None when it finished without one, else the
    task that runs the rest. Most requests (a send to a topic that exists, with asynchronous
    flush) never wait: they are served on the spot, without a task's cost (Python 3.12's eager
    task factory, by hand)."""
    try:
        waiting_on = coro.send(None)
    except StopIteration:
        return None
    return loop.create_task(_resume(coro, waiting_on))


async def _resume(coro: Coroutine[Any, Any, None], waiting_on: Any) -> None:
    """Drive a coroutine that ``eagerly`` started, from the future it first waited on: wait
    for each future it yields, then let it go on (it reads the future's result itself); a
    cancellation of this task is thrown into it."""
    while True:
        try:
            if waiting_on is None:  # a bare yield (asyncio.sleep(0)): give the loop a turn
                await asyncio.sleep(0)
            else:
                # Its yield marked the future as awaited by the one who got the yield (a task
                # would clear the mark as it takes the future): clear it, and await it here.
                waiting_on._asyncio_future_blocking = False
                await waiting_on
        except GeneratorExit:  # this task is being closed (its loop shut down): so is the request
            coro.close()
            raise
        except BaseException as exc:  # its own to handle, CancelledError included
            try:
                waiting_on = coro.throw(exc)
            except StopIteration:
                return
            continue
        try:
            waiting_on = coro.send(None)
        except StopIteration:
            return
