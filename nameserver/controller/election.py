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


def elections(groups: Iterable[GroupState], liveness: Liveness) -> list[Election]:
    out = []
    for group in groups:
        if group.master_id is not None:
            if liveness.lapsed(group.name, group.master_id, group.master_address):
                out.append(Election(group.name, choose_master(group, liveness), group.master_epoch))
        elif group.master_epoch > 0:
            candidate = choose_master(group, liveness)
            if candidate is not None:
                out.append(Election(group.name, candidate, group.master_epoch))
    return out
