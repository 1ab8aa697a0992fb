"""The controller's state, agreed by Raft through pysyncobj (the library Patroni uses).

We write no consensus code. pysyncobj keeps the log, elects the leader and replays
commands; this module adapts it to the nameserver:

- ``ReplicatedState`` holds the :class:`~nameserver.controller.state.ControllerState`
  behind pysyncobj's ``@replicated`` methods. Called on any node, a method is forwarded to
  the Raft leader, appended to the log, and applied on every node in log order; the caller
  hears the result once its own node has applied it. A refusal (a stale epoch, a replica id
  claimed twice) is a *result*, not an exception: an exception escaping an applied command
  would stop pysyncobj's apply loop and have it apply the command again.
- ``RaftNode`` runs one pysyncobj node. pysyncobj ticks in a thread of its own; ``propose``
  hands a command over with a callback and waits on an asyncio future settled through
  ``call_soon_threadsafe``, so the event loop never blocks. No leader, a lost leader or no
  commit within ``COMMIT_TIMEOUT_S`` is a retriable ``ControllerNotLeaderError``.
- Persistence: pysyncobj's journal (every log entry, as it is appended) and its full dump
  (at log compaction) live in ``controller_data_dir``, so a restarted nameserver replays its
  state and rejoins. The dump is written in the tick thread, not in a forked child: forking
  a process that runs gRPC is unsafe.

Security: pysyncobj exchanges *pickled* messages between nodes, and unpickling runs code.
So a controller with peers always has a password (``cluster_secret``; the config refuses
peers without it): pysyncobj then checks every message's HMAC (Fernet, through
``cryptography``) before it unpickles anything, so bytes from a process without the secret
are dropped with their connection. A one-node controller has nobody to talk to and opens no
Raft port at all (pysyncobj's base ``Transport``, which binds nothing).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pysyncobj import FAIL_REASON, SyncObj, SyncObjConf, SyncObjConsumer, replicated
from pysyncobj.syncobj import SyncObjException
from pysyncobj.transport import TCPTransport, Transport

from nameserver.controller.state import ControllerState, GroupState
from rocketspark.dirlock import DirLock
from rocketspark.errors import ControllerNotLeaderError, RocketSparkError, SystemError_

log = logging.getLogger("nameserver.controller")

COMMIT_TIMEOUT_S = 2.0  # under the clients' 3 s request timeout, so they hear why
BIND_ATTEMPTS = 6  # 0.5 s apart: a restarted node may find its port briefly taken
ONE_NODE_LEADER_WAIT_S = 5.0

_WHY = {
    FAIL_REASON.QUEUE_FULL: "its command queue is full",
    FAIL_REASON.MISSING_LEADER: "it has no leader",
    FAIL_REASON.DISCARDED: "a new leader discarded the command",
    FAIL_REASON.NOT_LEADER: "the leader changed before it committed the command",
    FAIL_REASON.LEADER_CHANGED: "the leader changed before it committed the command",
    FAIL_REASON.REQUEST_DENIED: "the leader denied the command",
    FAIL_REASON.UNKNOWN_OUTCOME: "the outcome of the command is unknown",
}


class ReplicatedState(SyncObjConsumer):
    """The controller state behind pysyncobj's replicated methods (see the module docstring)."""

    def __init__(self) -> None:
        # Attributes set before the consumer's own __init__ are not part of the dump.
        self._lock = threading.Lock()  # applies run in pysyncobj's thread, reads in the loop's
        super().__init__()
        self.state = ControllerState()

    def snapshot(self) -> dict[str, GroupState]:
        with self._lock:
            return dict(self.state.groups)

    def group(self, name: str) -> GroupState | None:
        with self._lock:
            return self.state.groups.get(name)

    def _apply(self, operation: Callable[[ControllerState], GroupState]) -> GroupState | RocketSparkError:
        with self._lock:
            try:
                return operation(self.state)
            except RocketSparkError as refused:
                return refused
            except Exception as exc:  # a bug: answer it, and let pysyncobj go on to the next entry
                log.exception("controller: applying a replicated command failed")
                return SystemError_(f"the controller failed to apply a command: {type(exc).__name__}: {exc}")

    @replicated
    def barrier(self) -> None:
        """Changes nothing; applied, it shows every entry before it has been applied here."""

    @replicated
    def register_replica(
        self, name: str, cluster: str, replica_id: int, address: str, silent_holder: str | None
    ) -> GroupState | RocketSparkError:
        return self._apply(lambda s: s.register_replica(name, cluster, replica_id, address, silent_holder))

    @replicated
    def elect_master(self, name: str, candidate: int | None, expected_epoch: int) -> GroupState | RocketSparkError:
        return self._apply(lambda s: s.elect_master(name, candidate, expected_epoch))

    @replicated
    def switchover(self, name: str, target: int, expected_epoch: int) -> GroupState | RocketSparkError:
        return self._apply(lambda s: s.switchover(name, target, expected_epoch))

    @replicated
    def alter_sync_state_set(
        self, name: str, master_id: int, master_epoch: int, new_set: list[int], set_epoch: int
    ) -> GroupState | RocketSparkError:
        return self._apply(lambda s: s.alter_sync_state_set(name, master_id, master_epoch, new_set, set_epoch))


def _settle(future: asyncio.Future[tuple[Any, int]], outcome: tuple[Any, int]) -> None:
    if not future.done():  # it may have timed out
        future.set_result(outcome)


class RaftNode:
    """One pysyncobj node of the controller; ``start`` on the event loop, ``stop`` at the end."""

    def __init__(self, address: str, peers: list[str], data_dir: str, *, password: str | None = None) -> None:
        """``password``: the cluster secret, required with peers. pysyncobj encrypts and
        authenticates every Raft message with it (Fernet, through ``cryptography``), so a
        process without it can neither vote, read the controller's state, nor have anything
        unpickled."""
        if peers and not password:
            raise ValueError("a controller with peers needs a password (cluster_secret) for its Raft port")
        self.address = address
        self.password = password
        self.peers = sorted(peers)
        self.data_dir = Path(data_dir)
        self.state = ReplicatedState()
        self.lock = DirLock(self.data_dir, "controller_data_dir")
        self._node: SyncObj | None = None

    async def start(self) -> None:
        """Bind the Raft port and join the peers. A one-node controller also waits (briefly)
        to lead itself, so that the nameserver's first requests find a leader."""
        self.lock.acquire()  # one controller per journal: a second process stops before touching it
        conf = SyncObjConf(
            journalFile=str(self.data_dir / "raft.journal"),
            fullDumpFile=str(self.data_dir / "raft.dump"),
            useFork=False,
            bindAddress=self.address,
            commandsWaitLeader=False,  # fail at once rather than apply long after the caller gave up
            maxBindRetries=BIND_ATTEMPTS,
            bindRetryTime=0.5,
            connectionRetryTime=1.0,  # reconnect to a restarted peer within a second (default 5)
            leaderFallbackTimeout=3.0,  # a cut-off leader steps down in 3 s (default 30)
            password=self.password,
        )
        # Created on the event loop's thread: pysyncobj's thread stops when its creator's does.
        # A one-node controller talks to nobody: its transport binds no port
        transport = TCPTransport if self.peers else Transport
        try:
            node = SyncObj(self.address, self.peers, conf, consumers=[self.state], transportClass=transport)
        except BaseException:
            self.lock.release()
            raise
        self._node = node
        try:
            await asyncio.to_thread(node.waitBinded)
        except SyncObjException:
            await self.stop()
            raise OSError(
                f"the controller cannot listen for Raft on {self.address} (controller_raft_address): "
                "address in use or not available"
            ) from None
        if not self.peers:
            await self._catch_up(ONE_NODE_LEADER_WAIT_S)
        log.info("controller Raft node %s started (peers: %s; data in %s)", self.address, self.peers, self.data_dir)

    async def _catch_up(self, timeout_s: float) -> None:
        """Wait until this node leads and has applied its whole log (a restarted one-node
        controller replays its journal): a barrier command through Raft shows both."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while loop.time() < deadline:
            try:
                await self.commit("barrier")
                return
            except ControllerNotLeaderError:
                await asyncio.sleep(0.05)
        log.warning("controller %s has no Raft leader %g s after start; requests wait for one", self.address, timeout_s)

    async def stop(self) -> None:
        node, self._node = self._node, None
        if node is not None:
            await asyncio.to_thread(node.destroy_synchronous)
        self.lock.release()

    # -- status --------------------------------------------------------------------------------

    def leader(self) -> str | None:
        """The Raft leader's address as this node last heard (it may be out of date)."""
        leader = None if self._node is None else self._node._getLeader()
        return None if leader is None else str(leader.address)

    def is_leader(self) -> bool:
        return self._node is not None and bool(self._node._isLeader())

    def status(self) -> dict[str, Any]:
        if self._node is None:
            return {}
        status: dict[str, Any] = self._node.getStatus()
        return status

    def snapshot(self) -> dict[str, GroupState]:
        return self.state.snapshot()

    def group(self, name: str) -> GroupState | None:
        return self.state.group(name)

    # -- commands ------------------------------------------------------------------------------

    async def propose(self, method: str, *args: Any) -> GroupState:
        """Run a replicated method of ``ReplicatedState`` through Raft and return the group it
        left; raise its refusal, or ControllerNotLeaderError when Raft cannot commit it now."""
        result = await self.commit(method, *args)
        if isinstance(result, RocketSparkError):
            raise result
        assert isinstance(result, GroupState)
        return result

    async def commit(self, method: str, *args: Any) -> Any:
        """Run a replicated method through Raft; its result once applied on this node."""
        leader = self.leader()
        if self._node is None or leader is None:
            raise self._not_leader("it has no leader")
        loop = asyncio.get_running_loop()
        done: asyncio.Future[tuple[Any, int]] = loop.create_future()

        def on_result(result: Any, error: int) -> None:  # in pysyncobj's thread; must never raise
            try:
                loop.call_soon_threadsafe(_settle, done, (result, error))
            except RuntimeError:  # the loop is closed: the nameserver is stopping
                pass

        getattr(self.state, method)(*args, callback=on_result)
        try:
            result, error = await asyncio.wait_for(done, COMMIT_TIMEOUT_S)
        except TimeoutError:
            raise self._not_leader(f"its leader {leader} did not commit within {COMMIT_TIMEOUT_S:g} s") from None
        if error != FAIL_REASON.SUCCESS:
            raise self._not_leader(_WHY.get(error, f"pysyncobj failure {error}"))
        return result

    def _not_leader(self, why: str) -> ControllerNotLeaderError:
        peers = ", ".join(self.peers) or "none: a one-node controller"
        return ControllerNotLeaderError(
            f"the controller has no Raft leader right now ({why}; this node {self.address}, peers {peers}); "
            "retry in a second. With several nameservers, a majority of them must be up"
        )
