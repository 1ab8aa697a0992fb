"""The controller's replicated state: every rule, as a pure function Raft can replay."""

from __future__ import annotations

import pickle

import pytest

from nameserver.controller.state import ControllerState, GroupState
from rocketspark.errors import (
    ControllerElectMasterFailedError,
    ControllerFencedEpochError,
    ControllerFencedSyncStateSetEpochError,
    ControllerGroupNotExistError,
    ControllerInvalidMasterError,
    ControllerInvalidReplicasError,
    ControllerInvalidRequestError,
    ControllerMasterStillExistError,
    ControllerReplicaIdInvalidError,
)

A, B, C = "127.0.0.1:1001", "127.0.0.1:1002", "127.0.0.1:1003"


def three_replicas() -> ControllerState:
    state = ControllerState()
    for replica_id, address in ((1, A), (2, B), (3, C)):
        state.register_replica("g", "C1", replica_id, address)
    return state


def test_the_first_replica_registered_becomes_master_at_epoch_1_and_the_others_join_as_slaves() -> None:
    state = ControllerState()
    first = state.register_replica("g", "C1", 2, B)
    assert (first.master_id, first.master_address, first.master_epoch) == (2, B, 1)
    assert first.sync_state_set == {2} and first.sync_state_set_epoch == 1
    state.register_replica("g", "C1", 1, A)
    group = state.register_replica("g", "C1", 3, C)
    assert group.master_id == 2 and group.master_epoch == 1 and group.sync_state_set == {2}
    assert dict(group.replicas) == {1: A, 2: B, 3: C}


def test_registering_again_at_the_same_address_changes_nothing() -> None:
    state = three_replicas()
    before = state.group("g")
    assert state.register_replica("g", "C1", 3, C) == before


def test_two_replicas_claiming_one_replica_id_are_refused() -> None:
    state = three_replicas()
    with pytest.raises(ControllerReplicaIdInvalidError, match=r"replica id 2 of group \"g\" is held by 127.0.0.1:1002"):
        state.register_replica("g", "C1", 2, "127.0.0.1:9999")
    assert state.group("g").replicas[2] == B


def test_one_address_under_two_replica_ids_is_refused() -> None:
    state = three_replicas()
    with pytest.raises(ControllerReplicaIdInvalidError, match=r"127.0.0.1:1003 is replica 3 .* again as replica 4"):
        state.register_replica("g", "C1", 4, C)


def test_a_silent_holders_replica_id_may_move_to_a_new_address() -> None:
    state = three_replicas()
    moved = state.register_replica("g", "C1", 2, "127.0.0.1:2002", silent_holder=B)
    assert moved.replicas[2] == "127.0.0.1:2002"
    with pytest.raises(ControllerReplicaIdInvalidError):  # the judgement names the holder it was made about
        state.register_replica("g", "C1", 2, "127.0.0.1:3003", silent_holder=B)


def test_a_group_belongs_to_one_cluster() -> None:
    state = three_replicas()
    with pytest.raises(ControllerInvalidRequestError, match='belongs to cluster "C1"'):
        state.register_replica("g", "C2", 4, "127.0.0.1:1004")


def test_the_master_adds_slaves_to_the_sync_state_set_and_each_change_raises_its_epoch() -> None:
    state = three_replicas()
    group = state.alter_sync_state_set("g", master_id=1, master_epoch=1, new_set=[1, 2])
    assert group.sync_state_set == {1, 2} and group.sync_state_set_epoch == 2
    group = state.alter_sync_state_set("g", 1, 1, [1, 2, 3], sync_state_set_epoch=2)
    assert group.sync_state_set == {1, 2, 3} and group.sync_state_set_epoch == 3
    assert state.alter_sync_state_set("g", 1, 1, [3, 2, 1]) is group  # the same set again: nothing to do
    assert group.master_epoch == 1  # the set changes, the master epoch does not


def test_only_the_current_master_at_the_current_epochs_alters_the_set() -> None:
    state = three_replicas()
    with pytest.raises(ControllerInvalidMasterError, match=r"replica 2 .* is not the master"):
        state.alter_sync_state_set("g", 2, 1, [1, 2])
    with pytest.raises(ControllerFencedEpochError, match="decided at master epoch 0"):
        state.alter_sync_state_set("g", 1, 0, [1, 2])
    with pytest.raises(ControllerFencedSyncStateSetEpochError, match="at epoch 1, not 7"):
        state.alter_sync_state_set("g", 1, 1, [1, 2], sync_state_set_epoch=7)
    assert state.group("g").sync_state_set == {1}


def test_a_sync_state_set_holds_the_master_and_registered_replicas_only() -> None:
    state = three_replicas()
    with pytest.raises(ControllerInvalidReplicasError, match="must hold its master, replica 1"):
        state.alter_sync_state_set("g", 1, 1, [2, 3])
    with pytest.raises(ControllerInvalidReplicasError, match=r"replica id\(s\) \[9\] that are not registered"):
        state.alter_sync_state_set("g", 1, 1, [1, 9])


def test_an_election_installs_a_sync_state_set_member_raises_the_epoch_and_resets_the_set() -> None:
    state = three_replicas()
    state.alter_sync_state_set("g", 1, 1, [1, 2])
    group = state.elect_master("g", 2, expected_master_epoch=1)
    assert (group.master_id, group.master_address, group.master_epoch) == (2, B, 2)
    assert group.sync_state_set == {2} and group.sync_state_set_epoch == 3  # the others rejoin as they catch up


def test_two_elections_decided_on_the_same_view_cannot_both_win() -> None:
    state = three_replicas()
    state.alter_sync_state_set("g", 1, 1, [1, 2, 3])
    assert state.elect_master("g", 2, 1).master_id == 2
    with pytest.raises(ControllerFencedEpochError, match="decided at master epoch 1, and the group is at epoch 2"):
        state.elect_master("g", 3, 1)
    assert state.group("g").master_id == 2


def test_a_replica_outside_the_sync_state_set_is_never_elected() -> None:
    state = three_replicas()
    state.alter_sync_state_set("g", 1, 1, [1, 2])
    with pytest.raises(ControllerElectMasterFailedError, match=r"127.0.0.1:1003\) refused: it is not in the SyncState"):
        state.elect_master("g", 3, 1)
    with pytest.raises(ControllerInvalidReplicasError, match="replica 8 is not registered"):
        state.elect_master("g", 8, 1)
    assert state.group("g").master_id == 1 and state.group("g").master_epoch == 1


def test_electing_no_one_deposes_the_master_keeps_the_set_and_fences_the_old_epoch() -> None:
    state = three_replicas()
    state.alter_sync_state_set("g", 1, 1, [1, 2])
    group = state.elect_master("g", None, 1)
    assert group.master_id is None and group.master_address is None and group.master_epoch == 2
    assert group.sync_state_set == {1, 2}
    assert state.elect_master("g", None, 2) is group  # no master already: nothing to do
    with pytest.raises(ControllerInvalidMasterError):  # the deposed master can no longer change the set
        state.alter_sync_state_set("g", 1, 1, [1])
    back = state.elect_master("g", 1, 2)  # a set member returns
    assert back.master_id == 1 and back.master_epoch == 3


def test_a_switchover_goes_to_a_sync_state_set_member_only() -> None:
    state = three_replicas()
    state.alter_sync_state_set("g", 1, 1, [1, 2])
    with pytest.raises(ControllerElectMasterFailedError, match=r'switchover in "g" to replica 3 .* not in the SyncSt'):
        state.switchover("g", 3, 1)
    with pytest.raises(ControllerMasterStillExistError, match="already the master"):
        state.switchover("g", 1, 1)
    with pytest.raises(ControllerFencedEpochError):
        state.switchover("g", 2, 0)
    group = state.switchover("g", 2, 1)
    assert (group.master_id, group.master_epoch, group.sync_state_set) == (2, 2, {2})


def test_an_unknown_group_is_named_with_the_known_ones() -> None:
    state = three_replicas()
    with pytest.raises(ControllerGroupNotExistError, match=r'no replica group "h" \(known groups: g\)'):
        state.elect_master("h", 1, 0)


def test_replaying_the_same_operations_gives_the_same_state_and_it_pickles() -> None:
    def replay() -> ControllerState:
        state = three_replicas()
        state.alter_sync_state_set("g", 1, 1, [1, 3])
        state.elect_master("g", 3, 1)
        state.register_replica("h", "C1", 0, "127.0.0.1:2000")
        return state

    first, second = replay(), replay()
    assert first.groups == second.groups
    restored: ControllerState = pickle.loads(pickle.dumps(first))  # Raft's dump file
    assert restored.groups == first.groups and isinstance(restored.groups["g"], GroupState)
