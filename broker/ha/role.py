"""This replica's place in its group, as the controller last told it, and the master's lease.

In controller mode a broker learns its role from the controller's answer to each heartbeat:
the group's master, the master epoch and the SyncStateSet. A master may acknowledge writes
only while its lease holds: the lease is renewed by every heartbeat answer that still names
it master at its epoch, and lasts ``master_lease_ms`` from when that heartbeat was sent, less
than the controller's heartbeat timeout. So a master that was paused (SIGSTOP) and resumes finds its lease run out and
refuses writes until the controller has told it where it stands: by then another master may
have been elected, and this one learns it is deposed (fencing by lease, as Patroni does).

Without controller mode a broker is its group's only replica, always master.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from rocketspark.errors import NotMasterError

MASTER = "master"
SLAVE = "slave"


@dataclass(frozen=True, slots=True)
class GroupView:
    """The controller's view of one replica group."""

    master: str | None  # address
    master_replica_id: int | None
    master_epoch: int
    sync_state_set: frozenset[int]  # replica ids
    sync_state_set_epoch: int = 0
    replicas: dict[int, str] = field(default_factory=dict)  # replica id -> address


@dataclass
class Role:
    group: str
    replica_id: int
    controller_mode: bool
    lease_ms: int
    view: GroupView | None = None
    lease_until: float = 0.0
    min_epoch: int = 0  # the oldest epoch it may lead: newer than any its log held when it started

    @property
    def is_master(self) -> bool:
        if not self.controller_mode:
            return True
        return self.named_master and self.view is not None and self.view.master_epoch >= self.min_epoch

    @property
    def named_master(self) -> bool:
        """The view names this replica master (whether or not its epoch is one it may lead)."""
        return self.view is not None and self.view.master_replica_id == self.replica_id

    @property
    def epoch(self) -> int:
        return self.view.master_epoch if self.view is not None else 0

    @property
    def master_address(self) -> str | None:
        return self.view.master if self.view is not None else None

    def learn(self, view: GroupView, sent: float | None = None) -> None:
        """A heartbeat answer: the group as the controller sees it now. The lease runs from
        when the heartbeat was *sent* (``sent``, monotonic): the controller's timeout runs from
        when it arrived, later, so the lease always ends first."""
        self.view = view
        if self.is_master:
            self.lease_until = (time.monotonic() if sent is None else sent) + self.lease_ms / 1000

    def check_writable(self) -> None:
        """Refuse a write unless this replica is the master and its lease holds."""
        if not self.controller_mode:
            return
        if not self.is_master:
            master = self.master_address or "none right now (an election is under way)"
            raise NotMasterError(
                f"replica {self.replica_id} of broker group {self.group} is a slave; its master is {master}. "
                "Re-read the route and send to the master"
            )
        if time.monotonic() > self.lease_until:
            raise NotMasterError(
                f"replica {self.replica_id} of broker group {self.group} cannot be sure it is still the master "
                "(its lease from the controller ran out: it was paused or cannot reach the controller); "
                "re-read the route and retry"
            )
