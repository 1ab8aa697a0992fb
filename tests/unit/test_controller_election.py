"""Liveness and the election scan's decisions, on a fake clock."""

from __future__ import annotations

from nameserver.controller.election import Election, after_restart, choose_master, elections
from nameserver.controller.liveness import Liveness
from nameserver.controller.state import ControllerState

A, B, C = "127.0.0.1:1001", "127.0.0.1:1002", "127.0.0.1:1003"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def setup(in_sync: list[int]) -> tuple[ControllerState, Liveness, Clock]:
    state = ControllerState()
    for replica_id, address in ((1, A), (2, B), (3, C)):
        state.register_replica("g", "C1", replica_id, address)
    state.alter_sync_state_set("g", 1, 1, in_sync)
    clock = Clock()
    return state, Liveness(1500, clock), clock


def beat_all(liveness: Liveness, offsets: dict[int, int], epoch: int = 1) -> None:
    for replica_id, offset in offsets.items():
        liveness.record("g", replica_id, {1: A, 2: B, 3: C}[replica_id], offset, epoch)


def test_a_master_within_its_timeout_is_left_alone() -> None:
    state, liveness, clock = setup([1, 2])
    beat_all(liveness, {1: 10, 2: 10, 3: 10})
    clock.now += 1.4
    assert elections(state.groups.values(), liveness) == []


def test_a_lapsed_master_is_replaced_by_the_live_in_sync_replica_never_by_one_outside_the_set() -> None:
    state, liveness, clock = setup([1, 2])
    beat_all(liveness, {1: 10, 2: 5, 3: 99})  # 3 has the most, but it is not in the SyncStateSet
    clock.now += 1.0
    beat_all(liveness, {2: 5, 3: 99})
    clock.now += 0.6
    assert elections(state.groups.values(), liveness) == [Election("g", 2, 1)]


def test_the_candidate_with_the_newest_epoch_then_the_highest_offset_wins_ties_by_lowest_id() -> None:
    state, liveness, _clock = setup([1, 2, 3])
    beat_all(liveness, {2: 50, 3: 80})
    assert choose_master(state.group("g"), liveness) == 3
    beat_all(liveness, {2: 50, 3: 80})
    liveness.record("g", 2, B, 40, 2)  # it saw a newer epoch: it has the newer history
    assert choose_master(state.group("g"), liveness) == 2
    beat_all(liveness, {2: 80, 3: 80})
    assert choose_master(state.group("g"), liveness) == 2


def test_with_no_live_member_the_master_is_deposed_and_a_returning_member_is_elected() -> None:
    state, liveness, clock = setup([1, 2])
    beat_all(liveness, {1: 10, 2: 10, 3: 10})
    clock.now += 2
    beat_all(liveness, {3: 10})  # only the replica outside the set is alive
    assert elections(state.groups.values(), liveness) == [Election("g", None, 1)]
    state.elect_master("g", None, 1)
    assert elections(state.groups.values(), liveness) == []  # no master, no live member: wait
    beat_all(liveness, {2: 10})
    assert elections(state.groups.values(), liveness) == [Election("g", 2, 2)]


def test_a_new_leader_waits_one_timeout_before_judging_anyone_dead() -> None:
    state, liveness, clock = setup([1, 2])
    beat_all(liveness, {1: 10, 2: 10})
    clock.now += 60  # an old table: everyone looks silent
    liveness.grant_grace()
    assert elections(state.groups.values(), liveness) == []
    beat_all(liveness, {2: 10})
    clock.now += 1.0
    assert elections(state.groups.values(), liveness) == []
    clock.now += 0.6
    beat_all(liveness, {2: 10})
    assert elections(state.groups.values(), liveness) == [Election("g", 2, 1)]


def test_a_master_never_heard_from_here_is_judged_from_when_this_node_first_asks() -> None:
    state, liveness, clock = setup([1, 2])  # registered through another nameserver
    beat_all(liveness, {2: 10})
    assert elections(state.groups.values(), liveness) == []
    clock.now += 1.0
    assert elections(state.groups.values(), liveness) == []
    clock.now += 0.6
    beat_all(liveness, {2: 10})
    assert elections(state.groups.values(), liveness) == [Election("g", 2, 1)]


def test_a_beat_counts_only_at_the_registered_address() -> None:
    state, liveness, _clock = setup([1, 2])
    liveness.record("g", 2, "127.0.0.1:6666", 99, 1)  # someone else claiming replica 2
    assert not liveness.alive("g", 2, B) and liveness.alive("g", 2, "127.0.0.1:6666")
    assert choose_master(state.group("g"), liveness) is None


def test_a_master_whose_port_refuses_connections_is_replaced_after_a_second_not_the_timeout() -> None:
    state, liveness, clock = setup([1, 2])
    beat_all(liveness, {1: 10, 2: 10})
    clock.now += 0.9
    liveness.record("g", 2, B, 10, 1, master_unreachable=True)
    assert elections(state.groups.values(), liveness) == []  # silent under a second: maybe a blip
    clock.now += 0.2
    liveness.record("g", 2, B, 10, 1, master_unreachable=True)
    assert elections(state.groups.values(), liveness) == [Election("g", 2, 1)]


def test_a_refusal_reported_by_a_replica_outside_the_set_or_before_the_masters_last_beat_counts_for_nothing() -> None:
    state, liveness, clock = setup([1, 2])
    liveness.record("g", 3, C, 10, 1, master_unreachable=True)  # 3 is not in the set
    liveness.record("g", 2, B, 10, 1, master_unreachable=True)
    beat_all(liveness, {1: 10})  # the master beat after 2's report: it is there
    clock.now += 1.2
    liveness.record("g", 3, C, 10, 1, master_unreachable=True)
    assert elections(state.groups.values(), liveness) == []
    clock.now += 0.4  # lapsed at 1.5 s all the same
    beat_all(liveness, {2: 10})
    assert elections(state.groups.values(), liveness) == [Election("g", 2, 1)]


def test_a_restarted_master_is_reelected_against_the_live_members_of_its_set() -> None:
    state, liveness, _clock = setup([1, 2, 3])
    group = state.group("g")
    beat_all(liveness, {2: 50, 3: 80})
    assert after_restart(group, liveness, 1, 60, 1) == 3  # a slave holds more than it kept
    assert after_restart(group, liveness, 1, 90, 1) == 1  # it holds the most: it leads again
    assert after_restart(group, liveness, 1, 10, 2) == 1  # the newest epoch first
    fresh = state.elect_master("g", after_restart(group, liveness, 1, 90, 1), group.master_epoch)
    assert (fresh.master_id, fresh.master_epoch) == (1, group.master_epoch + 1)  # a new epoch, even for itself
