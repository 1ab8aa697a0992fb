"""The long-poll hub: held pulls wake on a send to their queue, and only then."""

from __future__ import annotations

import asyncio

from broker.longpoll import LongPollHub

KEY = ("orders", 0)


def test_a_poller_that_waits_again_after_a_wake_is_woken_by_the_next_send() -> None:
    """Two pollers woken together: the first to run waits again before the second cleans up.
    The second's clean-up must not throw away the first one's new wait."""

    async def scenario() -> tuple[bool, bool]:
        hub = LongPollHub()
        second_wait_started = asyncio.Event()

        async def rewaiter() -> bool:
            assert await hub.wait(KEY, 5)
            second_wait_started.set()
            return await hub.wait(KEY, 5)

        first = asyncio.create_task(rewaiter())
        other = asyncio.create_task(hub.wait(KEY, 5))
        await asyncio.sleep(0)
        hub.notify(KEY)
        await second_wait_started.wait()
        await asyncio.sleep(0)  # let the other poller finish its clean-up
        hub.notify(KEY)
        return await asyncio.wait_for(first, 1), await other

    assert asyncio.run(scenario()) == (True, True)


def test_a_wait_times_out_without_a_send_and_leaves_nothing_behind() -> None:
    async def scenario() -> tuple[bool, int]:
        hub = LongPollHub()
        woken = await hub.wait(KEY, 0.01)
        return woken, hub.waiting

    assert asyncio.run(scenario()) == (False, 0)
