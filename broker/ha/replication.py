"""Replication in a replica group: the master's side (acknowledging sends) and the slave's
(copying the master's log and metadata).

A slave copies by asking its master for the log from its own end, over and over
(``HA_PULL_LOG``); the master holds a request while there is nothing new, like a long poll.
Each request names the offset it asks from, which is the slave's acknowledgement (see
:mod:`broker.ha.acks`). Before a slave copies anything from a master of a new epoch, it
compares epoch files with it and cuts whatever it holds that the group never had (a master
that was deposed keeps writes that were never acknowledged; they go).

Topic configs, static-topic mappings, consumer offsets and idempotent producers' sequences
reach the slave as a snapshot every ``ha_metadata_interval_ms`` (``HA_GET_METADATA``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Protocol

from broker.ha.acks import AckTracker
from broker.ha.epochs import EpochFile, common_end
from broker.ha.role import Role
from broker.store.store import MessageStore
from rocketspark.errors import FlushSlaveTimeoutError, RocketSparkError, SlaveNotAvailableError
from rocketspark.protocol.codec import pack, unpack
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.record import RecordCorrupted
from rocketspark.remoting.client import RemotingClient, check

log = logging.getLogger(__name__)


class Metadata(Protocol):
    """What a master shares with its slaves besides the log."""

    def version(self) -> str: ...
    def snapshot(self) -> dict[str, Any]: ...
    def adopt(self, snapshot: dict[str, Any]) -> None: ...


class Replication:
    def __init__(
        self,
        store: MessageStore,
        role: Role,
        epochs: EpochFile,
        metadata: Metadata,
        *,
        in_sync_replicas: int,
        ack_timeout_ms: int,
        max_lag_ms: int,
        chunk_bytes: int,
        metadata_interval_ms: int,
    ) -> None:
        self.store = store
        self.role = role
        self.epochs = epochs
        self.metadata = metadata
        self.in_sync_replicas = in_sync_replicas
        self.ack_timeout_s = ack_timeout_ms / 1000
        self.chunk_bytes = chunk_bytes
        self.metadata_interval_s = metadata_interval_ms / 1000
        self.acks = AckTracker(max_lag_ms)
        self.client = RemotingClient(peer_kind="broker", default_timeout_ms=10_000)
        self._grew = asyncio.Event()
        self._copying: asyncio.Task[None] | None = None
        self._term: tuple[str, int] | None = None  # (role, epoch) acted on last
        self._floor = 0  # where an empty slave starts copying: the master's first segment

    # -- the master --------------------------------------------------------------------------

    def appended(self) -> None:
        """The log grew: wake the slaves' held requests."""
        self._grew.set()

    def _in_sync_slaves(self) -> set[int]:
        view = self.role.view
        return set(view.sync_state_set) - {self.role.replica_id} if view is not None else set()

    def check_can_acknowledge(self) -> None:
        """Before a send is stored: refuse it (nothing stored, so a retry is safe) when the
        SyncStateSet is too small to acknowledge it, e.g. right after a failover, until the
        slaves have caught up with the new master."""
        members = self._in_sync_slaves()
        if len(members) < self.in_sync_replicas - 1:
            raise SlaveNotAvailableError(
                f"broker group {self.role.group} has {len(members) + 1} in-sync replica(s), fewer than "
                f"in_sync_replicas = {self.in_sync_replicas}: nothing was stored. Retry (slaves rejoin as they "
                "catch up); if it lasts, start or repair the group's slaves, or lower in_sync_replicas"
            )

    async def acknowledge(self, end_offset: int) -> None:
        """Return once ``in_sync_replicas`` members of the SyncStateSet hold the log up to
        ``end_offset``; raise when they are too slow (the message is stored on the master)."""
        needed = self.in_sync_replicas - 1
        if needed <= 0:
            return
        members = self._in_sync_slaves()
        if not await self.acks.wait(end_offset, members, needed, self.ack_timeout_s):
            raise FlushSlaveTimeoutError(
                f"broker group {self.role.group}: {needed} slave(s) did not confirm the message within "
                f"{self.ack_timeout_s:g} s; it is on the master and may still reach them. A retry may store it twice"
            )

    async def serve_pull(self, replica_id: int, offset: int, wait_ms: int) -> bytes:
        """A slave asks for the log from ``offset``: note its progress, then answer with a
        chunk, holding the request up to ``wait_ms`` while there is nothing new."""
        log_end = self.store.commitlog.max_offset
        self.acks.report(replica_id, offset, log_end)
        deadline = time.monotonic() + wait_ms / 1000
        while True:
            chunk = self.store.read_chunk(offset, self.chunk_bytes)
            left = deadline - time.monotonic()
            if chunk or left <= 0:
                return chunk
            self._grew.clear()
            try:
                await asyncio.wait_for(self._grew.wait(), left)
            except TimeoutError:
                return b""

    def sync_state_set_wanted(self) -> set[int] | None:
        """The SyncStateSet this master would have now, or None when it is right as it is."""
        view = self.role.view
        if view is None or not self.role.is_master:
            return None
        current = set(view.sync_state_set) - {self.role.replica_id}
        wanted = self.acks.in_sync(current, self.store.commitlog.max_offset) | {self.role.replica_id}
        return None if wanted == set(view.sync_state_set) else wanted

    # -- changes of role ---------------------------------------------------------------------

    def role_changed(self) -> None:
        """Act on what the last heartbeat answer said: take office, or follow the master."""
        term = ("master" if self.role.is_master else "slave", self.role.epoch)
        if term == self._term:
            return
        self._term = term
        if self._copying is not None:
            self._copying.cancel()
            self._copying = None
        if self.role.is_master:
            self.epochs.begin(self.role.epoch, self.store.commitlog.max_offset)
            view = self.role.view
            self.acks.reset(set(view.sync_state_set) - {self.role.replica_id} if view else set())
            log.info("replica %d of %s is master at epoch %d", self.role.replica_id, self.role.group, self.role.epoch)
        elif self.role.master_address is not None:
            log.info(
                "replica %d of %s follows master %s (epoch %d)",
                self.role.replica_id,
                self.role.group,
                self.role.master_address,
                self.role.epoch,
            )
            self._copying = asyncio.get_running_loop().create_task(self._copy(self.role.master_address))

    # -- the slave ---------------------------------------------------------------------------

    async def _call(self, master: str, code: int, ext: dict[str, Any], timeout_ms: int) -> RemotingCommand:
        return check(await self.client.invoke_await(master, RemotingCommand.request(code, ext), timeout_ms))

    async def _copy(self, master: str) -> None:
        """Follow ``master`` until told otherwise: agree on history, then copy forever."""
        epoch = self.role.epoch
        backoff = 0.05
        while True:
            try:
                await self._rejoin(master, epoch)
                next_metadata, copied = 0.0, ""
                while True:
                    version = await self._copy_chunk(master, epoch)
                    if version != copied or time.monotonic() >= next_metadata:
                        await self._copy_metadata(master)
                        next_metadata, copied = time.monotonic() + self.metadata_interval_s, version
                    backoff = 0.05
            except (RocketSparkError, RecordCorrupted, ValueError, OSError) as exc:  # OSError: this disk
                log.warning("replica %d of %s copying from %s: %s", self.role.replica_id, self.role.group, master, exc)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 1.0)

    async def _rejoin(self, master: str, epoch: int) -> None:
        """Cut what this replica holds past the history it shares with the master."""
        response = await self._call(master, RequestCode.HA_GET_EPOCHS, {"masterEpoch": epoch}, 5000)
        theirs = [(int(e), int(o)) for e, o in unpack(response.body)]
        their_end = int(response.ext["logEnd"])
        self._floor = int(response.ext["logMin"])
        mine_end = self.store.commitlog.max_offset
        keep = common_end(self.epochs.entries, mine_end, theirs, their_end) if self.epochs.entries else mine_end
        keep = min(keep, their_end)
        if keep < mine_end:
            log.warning(
                "replica %d of %s cuts its log from %d to %d: what it held past there was never the group's",
                self.role.replica_id,
                self.role.group,
                mine_end,
                keep,
            )
            self.store.truncate_log(keep)
            self.epochs.truncate_after(keep)
        self.epochs.adopt(theirs, their_end)

    async def _copy_chunk(self, master: str, epoch: int) -> str:
        """Copy the next chunk; return the master's metadata version (topics and mappings)."""
        log_ = self.store.commitlog
        offset = log_.max_offset if log_.segments else self._floor
        ext = {"replicaId": self.role.replica_id, "offset": offset, "masterEpoch": epoch, "waitMs": 1000}
        response = await self._call(master, RequestCode.HA_PULL_LOG, ext, 6000)
        if response.body:
            self.store.append_copied(offset, response.body)
        return str(response.ext.get("metadata", ""))

    async def _copy_metadata(self, master: str) -> None:
        response = await self._call(master, RequestCode.HA_GET_METADATA, {}, 5000)
        self.metadata.adopt(unpack(response.body))

    def metadata_body(self) -> bytes:
        return pack(self.metadata.snapshot())

    def close(self) -> None:
        if self._copying is not None:
            self._copying.cancel()
        self.client.close()
