"""Consumer group membership: heartbeats join, silence and unregistering leave."""

from __future__ import annotations

import time

import pytest

from broker.consumers import ConsumerGroups
from rocketspark.errors import InvalidParameterError


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


def test_a_reset_id_not_above_the_last_one_is_refused_so_members_never_skip_a_reset() -> None:
    groups = ConsumerGroups(expired_ms=60_000)
    groups.reset("g", "orders", 2_000, {0: 5})
    with pytest.raises(InvalidParameterError, match="not newer than reset 2000"):
        groups.reset("g", "orders", 1_000, {0: 1})  # an admin whose clock is behind
    with pytest.raises(InvalidParameterError):
        groups.reset("g", "orders", 2_000, {0: 1})
    assert groups.resets_for("g") == {"orders": [2_000, {"0": 5}]}
    groups.reset("g", "orders", 2_001, {0: 1})
    groups.reset("g", "other", 1, {0: 0})  # each topic has its own ids
    assert groups.reset_version("g", "orders") == 2_001


def test_a_broker_that_forgot_its_resets_learns_from_members_what_the_next_must_exceed() -> None:
    groups = ConsumerGroups(expired_ms=60_000)  # restarted: no reset made here
    groups.heartbeat("g", "member-1", {"orders": 7_000})  # the member applied reset 7000 elsewhere, earlier
    groups.heartbeat("g", "member-2", {"orders": 5_000, "other": 3})
    assert groups.reset_ids("g") == {"orders": 7_000, "other": 3}
    assert groups.reset_version("g", "orders") == 0  # no reset made here: no commit is dropped
    with pytest.raises(InvalidParameterError, match="not newer than reset 7000"):
        groups.reset("g", "orders", 6_000, {0: 1})
    groups.reset("g", "orders", 7_001, {0: 1})
    assert groups.reset_ids("g")["orders"] == 7_001
    assert groups.resets_for("g") == {"orders": [7_001, {"0": 1}]}  # members are told only real resets
