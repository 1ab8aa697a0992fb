"""A group's queue locks on the broker: held while the holder is a member, and no longer."""

from __future__ import annotations

import time

from broker.consumers import ConsumerGroups


def test_a_queue_lock_is_one_members_until_it_unlocks_leaves_or_falls_silent() -> None:
    groups = ConsumerGroups(expired_ms=50)
    for member in ("a", "b"):
        groups.heartbeat("g", member)
    assert groups.lock("g", "t", 0, "a") == "a"
    assert groups.lock("g", "t", 0, "b") == "a"  # held
    assert groups.lock("g", "t", 0, "a") == "a"  # the holder asking again keeps it
    groups.unlock("g", "t", 0, "b")  # not the holder's: nothing happens
    assert groups.lock("g", "t", 0, "b") == "a"
    groups.unlock("g", "t", 0, "a")
    assert groups.lock("g", "t", 0, "b") == "b"  # handed over
    groups.unregister("g", "b")  # leaving drops its locks
    assert groups.lock("g", "t", 0, "a") == "a"
    time.sleep(0.08)  # "a" falls silent for longer than consumer_expired_ms
    groups.heartbeat("g", "b")
    assert groups.lock("g", "t", 0, "b") == "b"
    assert groups.lock("g", "t", 1, "a") == "a" and groups.lock("h", "t", 0, "a") == "a"  # per queue and group
