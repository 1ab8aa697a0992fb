"""What the Raft leader's election scan decides: which groups get which new master.

Pure functions of the replicated state and this node's liveness table, so the rules are
tested without Raft or processes. The decisions are proposed through Raft with the master
epoch they were made at; one made on a view that has moved on is refused when applied.

- A master that has lapsed is replaced by the best live member of the SyncStateSet: the
  highest master epoch it last reported, then the highest log offset, then the lowest
  replica id (deterministic for ties). With none alive, the group is left with no master.
- A group with no master gets one as soon as a member of its SyncStateSet is alive again.
- Replicas outside the SyncStateSet are never chosen: they may lack acknowledged messages
  (RocketMQ's unclean election, off by default there too, is not offered).
- A master that restarted (``after_restart``) is re-elected against the live members of its
  set, into a new epoch, never left in the one it held before its restart.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from nameserver.controller.liveness import Liveness
from nameserver.controller.state import GroupState


@dataclass(frozen=True, slots=True)
class Election:
    group: str
    candidate: int | None  # None: depose the lapsed master, elect no one
    expected_master_epoch: int


def choose_master(group: GroupState, liveness: Liveness) -> int | None:
    """The live SyncStateSet member (not the current master) most fit to lead, or None."""
    ranked = []
    for replica_id in group.sync_state_set - {group.master_id}:
        address = group.replicas.get(replica_id)
        beat = liveness.beat(group.name, replica_id, address)
        if beat is not None and liveness.alive(group.name, replica_id, address):
            ranked.append((-beat.master_epoch, -beat.max_offset, replica_id))
    return min(ranked)[2] if ranked else None


def after_restart(group: GroupState, liveness: Liveness, restarted: int, max_offset: int, epoch: int) -> int:
    """The master of a group whose master just restarted (it registered afresh): the best of
    it (with the log end and epoch it registered with) and the live SyncStateSet members.

    A restarted master must not carry on in the epoch it held before: what it wrote then may
    have been lost in its crash, or copied to slaves past where its log now ends. Whoever is
    chosen, the group goes to a new epoch, so every replica agrees on history again."""
    ranked = [(-epoch, -max_offset, restarted)]
    for replica_id in group.sync_state_set - {restarted}:
        address = group.replicas.get(replica_id)
        beat = liveness.beat(group.name, replica_id, address)
        if beat is not None and liveness.alive(group.name, replica_id, address):
            ranked.append((-beat.master_epoch, -beat.max_offset, replica_id))
    return min(ranked)[2]


def elections(groups: Iterable[GroupState], liveness: Liveness) -> list[Election]:
    out = []
    for group in groups:
        if group.master_id is not None:
            members = {r: group.replicas.get(r) for r in group.sync_state_set - {group.master_id}}
            master = (group.master_id, group.master_address)
            if liveness.lapsed(group.name, *master) or liveness.abandoned(group.name, master, members):
                out.append(Election(group.name, choose_master(group, liveness), group.master_epoch))
        elif group.master_epoch > 0:
            candidate = choose_master(group, liveness)
            if candidate is not None:
                out.append(Election(group.name, candidate, group.master_epoch))
    return out
