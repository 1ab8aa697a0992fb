"""Which replicas are alive, as this nameserver sees them (RocketMQ's heartbeat manager).

Brokers send BROKER_HEARTBEAT to every nameserver, so each controller node keeps its own
table and none of it goes through Raft: a heartbeat every second or so would flood the log,
and only the Raft leader acts on it anyway. A beat is keyed by group, replica id *and*
address, so a second process claiming a held replica id cannot make the holder look alive
or dead. Only registered replicas' beats are kept (the controller checks before it records),
so the table is as large as the registrations, whatever a client sends.

A master is replaced when it has been silent for the heartbeat timeout (``lapsed``), or
sooner when it is plainly gone (``abandoned``): silent for a second while a live member of
its SyncStateSet reports that its port refuses connections, which a killed process's does
and a paused or slow one's does not.

A node that has just become Raft leader may have been partitioned, restarted or slow, and
its table may be old or empty: ``grant_grace`` makes it wait one heartbeat timeout before
it judges any replica dead (``lapsed``). Likewise a replica this node has never heard from
(registered through another nameserver a moment ago) is judged from the first time this
node asks about it. Choosing a new master, though, needs a replica really heard from
(``alive``): neither rule ever makes a silent replica a candidate.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

Clock = Callable[[], float]


QUICK_LAPSE_S = 1.0  # a master this silent is replaced at once if a member of its set cannot connect to it


@dataclass(frozen=True, slots=True)
class Beat:
    address: str
    max_offset: int  # the replica's commit-log end when it beat
    master_epoch: int  # the master epoch it believed in; -1: none
    seen: float  # this node's monotonic clock, seconds
    master_unreachable: bool = False  # a slave: its master's port refuses connections (the process is gone)


class Liveness:
    def __init__(self, timeout_ms: int, clock: Clock = time.monotonic) -> None:
        self.timeout_s = timeout_ms / 1000
        self.clock = clock
        self._beats: dict[tuple[str, int, str], Beat] = {}
        self._first_asked: dict[tuple[str, int, str], float] = {}  # never heard from: judged from here
        self._grace_until = float("-inf")

    def record(
        self,
        group: str,
        replica_id: int,
        address: str,
        max_offset: int,
        master_epoch: int,
        *,
        master_unreachable: bool = False,
    ) -> None:
        beat = Beat(address, max_offset, master_epoch, self.clock(), master_unreachable)
        self._beats[(group, replica_id, address)] = beat

    def beat(self, group: str, replica_id: int, address: str | None) -> Beat | None:
        return None if address is None else self._beats.get((group, replica_id, address))

    def alive(self, group: str, replica_id: int, address: str | None) -> bool:
        """Heard from within the heartbeat timeout, at this address."""
        beat = self.beat(group, replica_id, address)
        return beat is not None and self.clock() - beat.seen <= self.timeout_s

    def lapsed(self, group: str, replica_id: int, address: str | None) -> bool:
        """Silent for longer than the timeout, and past any grace: to be replaced."""
        now = self.clock()
        if address is None:
            return now >= self._grace_until
        key = (group, replica_id, address)
        beat = self._beats.get(key)
        last = beat.seen if beat is not None else self._first_asked.setdefault(key, now)
        return now >= self._grace_until and now - last > self.timeout_s

    def abandoned(self, group: str, master: tuple[int, str | None], members: dict[int, str | None]) -> bool:
        """The master has been silent for ``QUICK_LAPSE_S`` and a live member of its set,
        heard from since, finds its port refusing connections: its process is gone (killed,
        crashed), and waiting out the whole timeout would only keep producers waiting. A
        master that is merely slow or paused keeps its port open and waits for the timeout."""
        now = self.clock()
        last = self.beat(group, *master)
        if now < self._grace_until or last is None or now - last.seen <= QUICK_LAPSE_S:
            return False
        for replica_id, address in members.items():
            beat = self.beat(group, replica_id, address)
            if (
                beat is not None
                and beat.master_unreachable
                and beat.seen > last.seen
                and self.alive(group, replica_id, address)
            ):
                return True
        return False

    def grant_grace(self) -> None:
        """Judge no replica dead for one timeout from now (this node just became leader)."""
        self._grace_until = self.clock() + self.timeout_s
