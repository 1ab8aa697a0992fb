"""Consumer group membership: heartbeats join, silence and unregistering leave."""

from __future__ import annotations

import time

from broker.consumers import ConsumerGroups


def test_members_are_those_heard_from_recently() -> None:
    groups = ConsumerGroups(expired_ms=60_000)
    groups.heartbeat("g", "b")
    groups.heartbeat("g", "a")
    groups.heartbeat("other", "c")
    assert groups.members("g") == ["a", "b"]
    groups.groups["g"]["b"] = time.monotonic() - 61  # silent for longer than the expiry
    assert groups.members("g") == ["a"]
    groups.unregister("g", "a")
    groups.unregister("g", "never-joined")
    assert groups.members("g") == []
    assert groups.members("other") == ["c"]
