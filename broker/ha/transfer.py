"""The log's way from a master to its slaves: a TCP connection of its own per slave, as
RocketMQ's HAService has (its HA port), not a request per chunk.

A slave connects to the master's HA port (learned from ``HA_GET_EPOCHS``, which also agrees
on history first) and says who it is, which epoch it follows and where its log ends
(``HELLO``). From then on the master pushes the log from there as it grows (``PUSH`` frames,
each a header with the bytes' CRC, then the bytes; an empty one every second tells the slave
the master is alive), and the slave answers every frame with its log end after storing it
(``ACK``): that is its acknowledgement, and, after a keepalive, its sign of life. With a
request per chunk every acknowledgement waited for the slave's next request to make its way
through gRPC; here both directions just flow.

A master closes every connection when it stops being master at that epoch, so a slave never
copies from a deposed master. Every field is big-endian.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
import zlib
from collections.abc import Callable
from typing import Final

from broker.ha.acks import AckTracker
from broker.ha.role import Role
from broker.store.store import MessageStore

log = logging.getLogger(__name__)

MAGIC: Final = 0x52534841  # "RSHA"
HELLO: Final = struct.Struct(">IiqQ")  # magic, replica id, master epoch it follows, its log end
# log offset, bytes that follow, their CRC32, master epoch, topics and mappings versions
PUSH: Final = struct.Struct(">QIIqQQ")
ACK: Final = struct.Struct(">Q")  # the slave's log end after storing a frame
KEEPALIVE_S: Final = 1.0  # an empty PUSH at least this often (and its ACK)
SILENCE_S: Final = 5.0  # a side that hears nothing this long drops the connection
MAX_PUSH_BYTES: Final = 64 * 1024 * 1024  # the most one PUSH carries (ha_chunk_bytes is capped to it)


class TransferError(Exception):
    """A connection that cannot go on (wrong peer, wrong epoch, an offset out of place)."""


class LogServer:
    """The master's HA port: one connection per slave, pushing the log as it grows."""

    def __init__(
        self, store: MessageStore, role: Role, acks: AckTracker, versions: Callable[[], tuple[int, int]], chunk: int
    ) -> None:
        self.store = store
        self.role = role
        self.acks = acks
        self.versions = versions
        self.chunk_bytes = min(chunk, MAX_PUSH_BYTES)
        self.port = 0
        self._server: asyncio.Server | None = None
        self._wakeups: set[asyncio.Event] = set()
        self._connections: set[asyncio.Task[None]] = set()
        self._by_replica: dict[int, asyncio.Task[None]] = {}  # a replica's newest connection

    async def start(self, host: str, port: int) -> int:
        self._server = await asyncio.start_server(self._serve, host, port)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self.port

    def appended(self) -> None:
        """The log grew: wake every connection waiting for more."""
        for wake in self._wakeups:
            wake.set()

    def drop_all(self) -> None:
        """This replica is not master at the epoch its slaves follow any more."""
        for task in list(self._connections):
            task.cancel()

    async def stop(self) -> None:
        self.drop_all()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        wake = asyncio.Event()
        self._wakeups.add(wake)
        peer = writer.get_extra_info("peername")
        replica_id = -1
        try:
            magic, replica_id, epoch, offset = HELLO.unpack(
                await asyncio.wait_for(reader.readexactly(HELLO.size), SILENCE_S)
            )
            self._check_hello(magic, epoch, offset)
            older = self._by_replica.get(replica_id)
            if older is not None:
                older.cancel()  # it reconnected: the old connection is half-open, or about to close
            self._by_replica[replica_id] = task
            self.acks.report(replica_id, offset, self.store.log_max_offset)
            await self._run(reader, writer, replica_id, epoch, offset, wake)
        except TransferError as exc:
            log.warning("HA connection from %s refused: %s", peer, exc)
        except (OSError, EOFError, asyncio.IncompleteReadError) as exc:
            log.info("HA connection from %s closed: %s", peer, exc or type(exc).__name__)
        finally:
            self._wakeups.discard(wake)
            self._connections.discard(task)
            if self._by_replica.get(replica_id) is task:
                del self._by_replica[replica_id]
            writer.close()

    def _check_hello(self, magic: int, epoch: int, offset: int) -> None:
        role, low, high = self.role, self.store.log_min_offset, self.store.log_max_offset
        if magic != MAGIC:
            raise TransferError(f"not a replica of this cluster (magic 0x{magic:08X})")
        if not role.is_master or epoch != role.epoch:
            raise TransferError(
                f"it follows epoch {epoch}, and replica {role.replica_id} of {role.group} is not master at it "
                f"(it knows master {role.master_address} at epoch {role.epoch})"
            )
        if offset > high or (self.store.log_segments and offset < low):
            raise TransferError(f"it asks for the log from {offset}, outside this master's [{low}, {high}]")

    async def _run(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        replica_id: int,
        epoch: int,
        offset: int,
        wake: asyncio.Event,
    ) -> None:
        acks = asyncio.create_task(self._read_acks(reader, replica_id))
        push = asyncio.create_task(self._push(writer, epoch, offset, wake))
        try:
            done, _ = await asyncio.wait((acks, push), return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                task.result()  # the error that ended it, if any
        finally:
            acks.cancel()
            push.cancel()
            await asyncio.gather(acks, push, return_exceptions=True)

    async def _read_acks(self, reader: asyncio.StreamReader, replica_id: int) -> None:
        while True:  # an ACK follows every PUSH, a keepalive too: silence means the slave is gone
            async with asyncio.timeout(SILENCE_S):  # (a deadline, not a task per read as wait_for makes)
                (offset,) = ACK.unpack(await reader.readexactly(ACK.size))
            self.acks.report(replica_id, offset, self.store.log_max_offset)

    async def _push(self, writer: asyncio.StreamWriter, epoch: int, offset: int, wake: asyncio.Event) -> None:
        while self.role.is_master and self.role.epoch == epoch:
            if self.store.log_segments and offset < self.store.log_min_offset:
                raise TransferError(
                    f"retention deleted the log before {self.store.log_min_offset} while a slave still needed it "
                    f"from {offset}"
                )
            chunk = self.store.read_chunk(offset, self.chunk_bytes)
            if not chunk:
                wake.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(KEEPALIVE_S):
                        await wake.wait()
                chunk = self.store.read_chunk(offset, self.chunk_bytes)
            writer.write(PUSH.pack(offset, len(chunk), zlib.crc32(chunk), epoch, *self.versions()))
            if chunk:
                writer.write(chunk)
            await writer.drain()
            offset += len(chunk)


class LogClient:
    """A slave's connection to its master's HA port."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, epoch: int) -> None:
        self.reader = reader
        self.writer = writer
        self.epoch = epoch

    @classmethod
    async def connect(cls, host: str, port: int, replica_id: int, epoch: int, offset: int) -> LogClient:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), SILENCE_S)
        writer.write(HELLO.pack(MAGIC, replica_id, epoch, offset))
        return cls(reader, writer, epoch)

    async def receive(self, expected: int) -> tuple[bytes, tuple[int, int]]:
        """The next frame's bytes (empty for a keepalive), which must start at ``expected``,
        and the master's metadata versions."""
        async with asyncio.timeout(SILENCE_S):
            head = await self.reader.readexactly(PUSH.size)
        offset, size, crc, epoch, topics, mappings = PUSH.unpack(head)
        if size > MAX_PUSH_BYTES:
            raise TransferError(f"a PUSH header claims {size} bytes, more than any master sends: not a master's frame")
        if epoch != self.epoch:
            raise TransferError(f"the master pushes at epoch {epoch}, not {self.epoch} as this replica follows")
        if offset != expected:
            raise TransferError(f"the master pushes the log from {offset}, not from this replica's end {expected}")
        body = b""
        if size:
            async with asyncio.timeout(SILENCE_S):
                body = await self.reader.readexactly(size)
        if zlib.crc32(body) != crc:
            raise TransferError(f"{size} bytes of the log from {offset} arrived damaged (CRC mismatch)")
        return body, (topics, mappings)

    def acknowledge(self, log_end: int) -> None:
        self.writer.write(ACK.pack(log_end))

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(OSError):
            await self.writer.wait_closed()
