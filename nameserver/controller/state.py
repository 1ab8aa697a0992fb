"""The controller's replicated state: per replica group, its replicas, master, epochs and
SyncStateSet (RocketMQ 5's ``ReplicasInfoManager`` and ``SyncStateInfo``, in our words).

Raft replays every operation on every nameserver, after a restart too, so each one is a
pure function of the state and its arguments: no clock, no liveness, no I/O. Whatever the
caller judged (who is alive, which replica is best) travels in the arguments, and each
operation checks again, on the state it is applied to, that the judgement still holds.
That is how two elections racing on one stale view cannot both win: an election names the
master epoch it was decided at, and only the first one applied finds it current.

The rules:

- ``register_replica``: a replica id belongs to one address per group, and an address to
  one replica id. Another address may take over an id only when the caller judged the
  holder silent (``silent_holder``), as RocketMQ updates a restarted broker's address. The
  first replica ever registered in a group becomes its master at epoch 1 (bootstrap).
- ``elect_master``: applied only at the expected master epoch; the new master must be in
  the SyncStateSet (unclean election is off), which becomes the new master alone: slaves
  rejoin as they catch up. Electing no one (``None``) deposes a lapsed master and keeps the
  set. Both raise the master epoch, so a deposed master is fenced.
- ``alter_sync_state_set``: only from the current master at the current master epoch (and
  SyncStateSet epoch, when given); the set must hold the master and registered replicas only.
- ``switchover``: a planned election of a named replica, which must be in the SyncStateSet.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

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


@dataclass(frozen=True, slots=True)
class GroupState:
    """One replica group (keyed by broker name). Never changed in place: every operation
    builds a new one, so a reader on another thread always sees a whole state."""

    name: str
    cluster: str
    replicas: Mapping[int, str] = field(default_factory=dict)  # replica id -> address
    master_id: int | None = None
    master_epoch: int = 0  # raised by every election and switchover; 0: never had a master
    sync_state_set: frozenset[int] = frozenset()
    sync_state_set_epoch: int = 0

    @property
    def master_address(self) -> str | None:
        return None if self.master_id is None else self.replicas.get(self.master_id)

    def id_of(self, address: str) -> int | None:
        return next((rid for rid, held in self.replicas.items() if held == address), None)

    def describe(self, replica_id: int) -> str:
        address = self.replicas.get(replica_id)
        return f"replica {replica_id}" + (f" ({address})" if address else "")


def _sorted(replicas: dict[int, str]) -> Mapping[int, str]:
    """A plain dict (a mapping proxy would not pickle into Raft's dump file), typed read-only."""
    return dict(sorted(replicas.items()))


class ControllerState:
    """Every replica group, and the operations Raft replays on them."""

    def __init__(self) -> None:
        self.groups: dict[str, GroupState] = {}

    def group(self, name: str) -> GroupState:
        found = self.groups.get(name)
        if found is None:
            known = ", ".join(sorted(self.groups)) or "none"
            raise ControllerGroupNotExistError(
                f'the controller knows no replica group "{name}" (known groups: {known}); '
                "its brokers register when they start with the controller enabled"
            )
        return found

    # -- operations (replayed by Raft; deterministic) ------------------------------------------

    def register_replica(
        self, name: str, cluster: str, replica_id: int, address: str, silent_holder: str | None = None
    ) -> GroupState:
        """Add (or confirm) a replica; the group's first replica becomes master at epoch 1."""
        group = self.groups.get(name) or GroupState(name, cluster)
        if group.cluster != cluster:
            raise ControllerInvalidRequestError(
                f'replica group "{name}" belongs to cluster "{group.cluster}"; {address} registered it under '
                f'"{cluster}". Fix cluster_name in that broker\'s config'
            )
        _check_claim(group, replica_id, address, silent_holder)
        replicas = dict(group.replicas)
        replicas[replica_id] = address
        group = replace(group, replicas=_sorted(replicas))
        if group.master_epoch == 0:  # never had a master: the first one to register leads
            group = _install_master(group, replica_id)
        self.groups[name] = group
        return group

    def elect_master(self, name: str, candidate: int | None, expected_master_epoch: int) -> GroupState:
        """Install ``candidate`` (or no master), if the epoch is still the one it was chosen at."""
        group = self.group(name)
        _check_epoch(group, expected_master_epoch, "election")
        if candidate is None:
            if group.master_id is None:
                return group
            group = replace(group, master_id=None, master_epoch=group.master_epoch + 1)
        else:
            _check_electable(group, candidate, "election")
            group = _install_master(group, candidate)
        self.groups[name] = group
        return group

    def switchover(self, name: str, target: int, expected_master_epoch: int) -> GroupState:
        """Hand the group over to ``target``, a member of its SyncStateSet."""
        group = self.group(name)
        _check_epoch(group, expected_master_epoch, "switchover")
        if target == group.master_id:
            raise ControllerMasterStillExistError(
                f'{group.describe(target)} is already the master of "{name}" (epoch {group.master_epoch})'
            )
        _check_electable(group, target, "switchover")
        group = _install_master(group, target)
        self.groups[name] = group
        return group

    def alter_sync_state_set(
        self,
        name: str,
        master_id: int,
        master_epoch: int,
        new_set: Iterable[int],
        sync_state_set_epoch: int = -1,
    ) -> GroupState:
        """The master's new SyncStateSet; the same set again changes nothing (a retry)."""
        group = self.group(name)
        wanted = frozenset(new_set)
        if group.master_id != master_id:
            current = "none" if group.master_id is None else group.describe(group.master_id)
            raise ControllerInvalidMasterError(
                f'{group.describe(master_id)} is not the master of "{name}" (the master is {current}, '
                f"epoch {group.master_epoch}): only the master changes the SyncStateSet"
            )
        _check_epoch(group, master_epoch, "SyncStateSet change")
        if sync_state_set_epoch >= 0 and sync_state_set_epoch != group.sync_state_set_epoch:
            raise ControllerFencedSyncStateSetEpochError(
                f'the SyncStateSet of "{name}" is at epoch {group.sync_state_set_epoch}, not {sync_state_set_epoch}: '
                "re-read it and decide again"
            )
        _check_members(group, wanted)
        if wanted == group.sync_state_set:
            return group
        group = replace(group, sync_state_set=wanted, sync_state_set_epoch=group.sync_state_set_epoch + 1)
        self.groups[name] = group
        return group


def _install_master(group: GroupState, master_id: int) -> GroupState:
    return replace(
        group,
        master_id=master_id,
        master_epoch=group.master_epoch + 1,
        sync_state_set=frozenset({master_id}),
        sync_state_set_epoch=group.sync_state_set_epoch + 1,
    )


def _check_claim(group: GroupState, replica_id: int, address: str, silent_holder: str | None) -> None:
    holder = group.replicas.get(replica_id)
    if holder is not None and holder != address and holder != silent_holder:
        raise ControllerReplicaIdInvalidError(
            f'replica id {replica_id} of group "{group.name}" is held by {holder}, which is alive; {address} claims '
            "it too. Give each replica of a group its own replica_id"
        )
    other = group.id_of(address)
    if other is not None and other != replica_id:
        raise ControllerReplicaIdInvalidError(
            f'{address} is replica {other} of group "{group.name}"; it cannot register again as replica '
            f"{replica_id}. A replica keeps its replica_id (or use another address)"
        )


def _check_epoch(group: GroupState, expected: int, what: str) -> None:
    if expected != group.master_epoch:
        raise ControllerFencedEpochError(
            f'{what} in "{group.name}" refused: it was decided at master epoch {expected}, and the group is at '
            f"epoch {group.master_epoch} now. Re-read the group and decide again"
        )


def _check_electable(group: GroupState, candidate: int, what: str) -> None:
    if candidate not in group.replicas:
        raise ControllerInvalidReplicasError(f'{what} in "{group.name}": replica {candidate} is not registered')
    if candidate not in group.sync_state_set:
        in_sync = ", ".join(group.describe(r) for r in sorted(group.sync_state_set)) or "none"
        raise ControllerElectMasterFailedError(
            f'{what} in "{group.name}" to {group.describe(candidate)} refused: it is not in the SyncStateSet '
            f"[{in_sync}], so it may lack acknowledged messages. Wait until it has caught up and joined the set"
        )


def _check_members(group: GroupState, wanted: frozenset[int]) -> None:
    if group.master_id not in wanted:
        raise ControllerInvalidReplicasError(
            f'a SyncStateSet of "{group.name}" must hold its master, replica {group.master_id}; got {sorted(wanted)}'
        )
    unknown = sorted(wanted - set(group.replicas))
    if unknown:
        raise ControllerInvalidReplicasError(
            f'a SyncStateSet of "{group.name}" names replica id(s) {unknown} that are not registered '
            f"(registered: {sorted(group.replicas)})"
        )
