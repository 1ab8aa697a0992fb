"""Replication in a replica group: the master's side (acknowledging sends) and the slave's
(copying the master's log and metadata).

A slave first compares epoch files with a master of a new epoch (``HA_GET_EPOCHS``) and cuts
whatever it holds that the group never had (a master that was deposed keeps writes that were
never acknowledged; they go). Then it connects to the master's HA port and receives the log
as the master pushes it, acknowledging each piece it stored with its new log end (see
:mod:`broker.ha.transfer` and :mod:`broker.ha.acks`).

Topic configs, static-topic mappings, consumer offsets and idempotent producers' sequences
reach the slave as a snapshot every ``ha_metadata_interval_ms`` (``HA_GET_METADATA``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from broker.ha.acks import AckTracker
from broker.ha.epochs import EpochFile, common_end
from broker.ha.role import Role
from broker.ha.transfer import LogClient, LogServer
from broker.store.scan import ScannedRecord
from broker.store.store import MessageStore
from rocketspark.errors import FlushSlaveTimeoutError, InvalidParameterError, SlaveNotAvailableError
from rocketspark.protocol.bodies import pack, unpack
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.remoting.client import RemotingClient, check
from rocketspark.security.settings import PeerSecurity

log = logging.getLogger(__name__)

PROBE_TIMEOUT_S = 0.5  # a master's port that neither accepts nor refuses in this time is not "gone"
INDEX_DELAY_S = 0.015  # a slave indexes what it copied this long after it arrived: ~2,000 records a pass
# at 130k msg/s, where a pass costs least per record (0.5 us; 0.7 at 400 records)


class Metadata(Protocol):
    """What a master shares with its slaves besides the log."""

    def version(self) -> tuple[int, int]: ...
    def snapshot(self) -> dict[str, Any]: ...
    def adopt(self, snapshot: dict[str, Any]) -> None: ...
    def take_office(self, records_after: Callable[[int], Iterator[ScannedRecord]]) -> None: ...


async def refuses_connections(address: str) -> bool:
    """Whether nothing listens at ``address`` (its process is gone). A paused or overloaded
    process's port still accepts (the kernel completes the handshake), so it is not."""
    host, port = address.rsplit(":", 1)
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, int(port)), PROBE_TIMEOUT_S)
    except ConnectionRefusedError:
        return True
    except (OSError, TimeoutError):
        return False
    writer.close()
    return False


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
        security: PeerSecurity | None = None,
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
        security = security or PeerSecurity(None, None, None)
        credentials, client_tls, server_tls = security.credentials, security.client_tls, security.server_tls
        self.client = RemotingClient(
            peer_kind="broker", default_timeout_ms=10_000, credentials=credentials, tls=client_tls
        )
        self.secret = credentials.secret_key if credentials is not None else None
        self.tls = client_tls.ssl_context() if client_tls is not None else None  # a slave's side of the HA port
        server_context = server_tls.ssl_context() if server_tls is not None else None
        self.server = LogServer(
            store, role, self.acks, metadata.version, chunk_bytes, secret=self.secret, tls=server_context
        )
        self._copying: asyncio.Task[None] | None = None
        self._term: tuple[str, int] | None = None  # (role, epoch) acted on last
        self._floor = 0  # where an empty slave starts copying: the master's first segment
        self._backoff = 0.05  # before following the master again after an error
        self.master_unreachable = False  # the master's port refused a connection: told to the controller

    # -- the master --------------------------------------------------------------------------

    def replica_offsets(self) -> dict[int, int]:
        """How far each slave has copied the log, by replica id, as their acks said (the
        metrics' replica lag)."""
        return {rid: progress.offset for rid, progress in sorted(self.acks.slaves.items())}

    def appended(self) -> None:
        """The log grew: push it to the slaves."""
        self.server.appended()

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

    @property
    def waits_for_slaves(self) -> bool:
        """Whether a send waits for slaves to acknowledge it (``acknowledge`` has work)."""
        return self.in_sync_replicas > 1

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

    def sync_state_set_wanted(self) -> set[int] | None:
        """The SyncStateSet this master would have now, or None when it is right as it is."""
        view = self.role.view
        if view is None or not self.role.is_master:
            return None
        current = set(view.sync_state_set) - {self.role.replica_id}
        wanted = self.acks.in_sync(current, self.store.log_max_offset) | {self.role.replica_id}
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
        self.server.drop_all()  # slaves following the term that ended
        if self.role.is_master:
            try:
                self.store.stop_copying()  # all it copied readable, a half-copied record cut, before any write
                self.metadata.take_office(self.store.records_after)  # idempotent producers from the log copied
            except Exception:  # a disk error: logged; the records stay in the log for recovery to index
                log.exception(
                    "replica %d of %s: indexing its copy on taking office", self.role.replica_id, self.role.group
                )
            self.epochs.begin(self.role.epoch, self.store.log_max_offset)
            view = self.role.view
            self.acks.reset(set(view.sync_state_set) - {self.role.replica_id} if view else set())
            log.info("replica %d of %s is master at epoch %d", self.role.replica_id, self.role.group, self.role.epoch)
        elif self.role.named_master:
            log.warning(
                "replica %d of %s is named master at epoch %d, which its log held before it restarted (it "
                "leads epoch %d or newer only): it waits for the controller to elect anew",
                self.role.replica_id,
                self.role.group,
                self.role.epoch,
                self.role.min_epoch,
            )
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
        """Follow ``master`` until told otherwise (this task is cancelled): agree on history,
        then copy; start over after any error (the connection, the master's answers, this
        replica's own disk), waiting longer each time the master cannot be followed."""
        epoch = self.role.epoch
        self._backoff = 0.05
        self.master_unreachable = False
        while True:
            try:
                port = await self._rejoin(master, epoch)
                self.master_unreachable = False
                await self._receive(master, port, epoch)
            except Exception as exc:  # not CancelledError: that ends the task
                log.warning(
                    "replica %d of %s copying from %s: %s",
                    self.role.replica_id,
                    self.role.group,
                    master,
                    str(exc) or type(exc).__name__,
                )
                self._index_copied()  # what arrived is readable while the master is away
                self.master_unreachable = await refuses_connections(master)
                await asyncio.sleep(self._backoff)
                self._backoff = min(self._backoff * 2, 1.0)

    async def _rejoin(self, master: str, epoch: int) -> int:
        """Cut what this replica holds past the history it shares with the master; return the
        master's HA port."""
        response = await self._call(master, RequestCode.HA_GET_EPOCHS, {"masterEpoch": epoch}, 5000)
        theirs = [(int(e), int(o)) for e, o in unpack(response.body)]
        their_end = int(response.ext["logEnd"])
        self._floor = int(response.ext["logMin"])
        mine_end = self.store.log_max_offset
        if self.store.log_segments and mine_end < self._floor:
            raise InvalidParameterError(
                f"replica {self.role.replica_id} of {self.role.group} holds the log up to {mine_end}, but its master "
                f"{master} has deleted everything before {self._floor} (retention): it can never catch up. Stop it, "
                "empty its data directory and start it again; it copies the master's log from the start"
            )
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
        return int(response.ext["haPort"])

    async def _receive(self, master: str, port: int, epoch: int) -> None:
        """Store what the master pushes, acknowledging each piece; copy the metadata when the
        master's changes (topics, mappings) and every ``ha_metadata_interval_ms``."""
        offset = self.store.log_max_offset if self.store.log_segments else self._floor
        host = master.rsplit(":", 1)[0]
        link = await LogClient.connect(host, port, self.role.replica_id, epoch, offset, self.secret, self.tls)
        copied = asyncio.Event()
        indexer = asyncio.get_running_loop().create_task(self._index_behind(copied, link))
        next_metadata, known = 0.0, (-1, -1)
        try:
            while True:
                chunk, versions = await link.receive(offset)
                self._backoff = 0.05  # the master is followed again
                if chunk:
                    self.store.append_copied(offset, chunk)
                    offset += len(chunk)
                    copied.set()
                link.acknowledge(offset)  # a keepalive too: the master sees this replica is there
                if versions != known or time.monotonic() >= next_metadata:
                    await self._copy_metadata(master)
                    next_metadata, known = time.monotonic() + self.metadata_interval_s, versions
        finally:
            indexer.cancel()
            await link.close()

    async def _index_behind(self, copied: asyncio.Event, link: LogClient) -> None:
        """Index what was copied, a few milliseconds after it was acknowledged, many pieces
        in one pass. A damaged record cuts the log back before it; the slave tells the master
        its shorter log and connects again from there."""
        while not self.role.is_master:  # taking office indexes it all at once
            await copied.wait()
            await asyncio.sleep(INDEX_DELAY_S)
            copied.clear()
            if not self._index_copied():
                link.acknowledge(self.store.log_max_offset)
                await link.close()  # the copy loop sees the connection end and starts over
                return

    def _index_copied(self) -> bool:
        """Index what was copied; False (logged) when that failed."""
        try:
            self.store.index_copied()
        except Exception as exc:  # a damaged record (cut, copied again), or this replica's disk
            log.warning("replica %d of %s: indexing its copy: %s", self.role.replica_id, self.role.group, exc)
            return False
        return True

    async def _copy_metadata(self, master: str) -> None:
        response = await self._call(master, RequestCode.HA_GET_METADATA, {}, 5000)
        self.metadata.adopt(unpack(response.body))

    def metadata_body(self) -> bytes:
        return pack(self.metadata.snapshot())

    async def start(self, host: str, port: int) -> int:
        """Open the HA port (every replica: any may become master)."""
        return await self.server.start(host, port)

    async def stop(self) -> None:
        if self._copying is not None:
            self._copying.cancel()
        await self.server.stop()

    def close(self) -> None:
        if self._copying is not None:
            self._copying.cancel()
        self.client.close()
