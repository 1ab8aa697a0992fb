"""The log's way from a master to its slaves: a TCP connection of its own per slave, as
RocketMQ's HAService has (its HA port), not a request per chunk.

A slave connects to the master's HA port (learned from ``HA_GET_EPOCHS``, which also agrees
on history first). The master sends a fresh random ``CHALLENGE``; the slave says who it is,
which epoch it follows and where its log ends (``HELLO``), and, when security is on, proves
it holds the cluster secret (``AUTH``: HMAC-SHA256 of the challenge and its HELLO, keyed
with ``cluster_secret``; zeros when security is off). A master with security on refuses a
connection without the right proof, and a captured proof is worth nothing on another
connection (its challenge differs). From then on the
master pushes the log from there as it grows (``PUSH`` frames, each a header with the bytes'
CRC, then the bytes; an empty one every second tells the slave the master is alive), and
the slave answers every frame with its log end after storing it (``ACK``): that is its
acknowledgement, and, after a keepalive, its sign of life. With a request per chunk every
acknowledgement waited for the slave's next request to make its way through gRPC; here both
directions just flow.

Each side notices a silent peer with one watchdog per connection (:class:`Hearing`), not a
timeout around every read: a timeout costs a timer per frame, and at a frame per send that
was a tenth of a replicated send's cost on the master. A frame is one socket write, header
and bytes together.

A master closes every connection when it stops being master at that epoch, so a slave never
copies from a deposed master. With TLS on, the port speaks TLS with the broker's certificate
(and asks for the slave's under mutual TLS). Every field is big-endian.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import logging
import secrets
import ssl
import struct
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Protocol

from broker.ha.acks import AckTracker
from broker.ha.role import Role

log = logging.getLogger(__name__)

MAGIC: Final = 0x52534832  # "RSH2" (version 2: challenge and AUTH; "RSHA" had neither)
CHALLENGE_BYTES: Final = 16  # the master's random challenge, sent first on every connection
HELLO: Final = struct.Struct(">IiqQ")  # magic, replica id, master epoch it follows, its log end
AUTH_BYTES: Final = 32  # HMAC-SHA256 of challenge + HELLO with the cluster secret (zeros: security off)
# log offset, bytes that follow, their CRC32, master epoch, topics and mappings versions
PUSH: Final = struct.Struct(">QIIqQQ")
ACK: Final = struct.Struct(">Q")  # the slave's log end after storing a frame
KEEPALIVE_S: Final = 1.0  # an empty PUSH at least this often (and its ACK)
SILENCE_S: Final = 5.0  # a side that hears nothing this long drops the connection
MAX_PUSH_BYTES: Final = 64 * 1024 * 1024  # the most one PUSH carries (ha_chunk_bytes is capped to it)


class LogSource(Protocol):
    """What the HA port reads of the master's store (a :class:`~broker.store.store.MessageStore`)."""

    @property
    def log_min_offset(self) -> int: ...
    @property
    def log_max_offset(self) -> int: ...
    @property
    def log_segments(self) -> int: ...
    def read_chunk(self, offset: int, max_bytes: int) -> bytes: ...


class TransferError(Exception):
    """A connection that cannot go on (wrong peer, wrong epoch, an offset out of place)."""


class Hearing:
    """When a connection last heard its peer, checked once a keepalive period by
    :meth:`watch` (the connection's watchdog)."""

    def __init__(self, peer: str, keepalive_s: float = KEEPALIVE_S, silence_s: float = SILENCE_S) -> None:
        self.peer = peer
        self.keepalive_s = keepalive_s
        self.silence_s = silence_s
        self.at = time.monotonic()
        self.listening = True  # silence counts only while waiting for the peer

    def heard(self) -> None:
        self.at = time.monotonic()

    def listen(self, listening: bool) -> None:
        """Start (True) or stop waiting for the peer: time spent on our own work between its
        messages (storing a frame, copying metadata) is not the peer's silence."""
        self.at = time.monotonic()
        self.listening = listening

    async def watch(self, tick: Callable[[], None]) -> None:
        """Every keepalive period: raise once the peer has been silent too long, else ``tick``."""
        while True:
            await asyncio.sleep(self.keepalive_s)
            silent = time.monotonic() - self.at
            if self.listening and silent > self.silence_s:
                raise TransferError(
                    f"{self.peer} was silent for {silent:.1f} s (it sends at least every {self.keepalive_s:g} s)"
                )
            tick()


def auth_frame(secret: str | None, challenge: bytes, hello: bytes) -> bytes:
    """What a slave sends after HELLO: proof that it holds the cluster secret (zeros: none)."""
    if secret is None:
        return bytes(AUTH_BYTES)
    return hmac.new(secret.encode(), challenge + hello, hashlib.sha256).digest()


def check_auth(secret: str, challenge: bytes, hello: bytes, auth: bytes) -> None:
    if not hmac.compare_digest(auth, auth_frame(secret, challenge, hello)):
        raise TransferError("it did not prove it holds this cluster's secret (cluster_secret): not a replica of it")


def _frame(offset: int, chunk: bytes, epoch: int, versions: tuple[int, int]) -> bytes:
    return PUSH.pack(offset, len(chunk), zlib.crc32(chunk), epoch, *versions) + chunk


@dataclass(eq=False, slots=True)
class _Link:
    """One slave connection's state on the master."""

    hearing: Hearing
    acked: asyncio.Event  # set by every ACK: the push waits for it before the next frame
    pushed: int  # the log end of the last frame pushed: no ACK counts for more


class LogServer:
    """The master's HA port: one connection per slave, pushing the log as it grows."""

    def __init__(
        self,
        store: LogSource,
        role: Role,
        acks: AckTracker,
        versions: Callable[[], tuple[int, int]],
        chunk: int,
        hearing: Callable[[str], Hearing] = Hearing,
        secret: str | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.store = store
        self.role = role
        self.acks = acks
        self.versions = versions
        self.chunk_bytes = min(chunk, MAX_PUSH_BYTES)
        self.hearing = hearing  # a connection's watchdog (tests shorten its periods)
        self.secret = secret  # the cluster secret a slave must prove it holds (None: security off)
        self.tls = tls  # the server side of TLS on the HA port (None: plaintext)
        self.port = 0
        self._server: asyncio.Server | None = None
        self._wakeups: set[asyncio.Event] = set()
        self._connections: set[asyncio.Task[None]] = set()
        self._by_replica: dict[int, asyncio.Task[None]] = {}  # a replica's newest connection

    async def start(self, host: str, port: int) -> int:
        self._server = await asyncio.start_server(self._serve, host, port, ssl=self.tls)
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
            challenge = secrets.token_bytes(CHALLENGE_BYTES)
            writer.write(challenge)
            hello, auth = await asyncio.wait_for(self._read_hello(reader), SILENCE_S)
            magic, replica_id, epoch, offset = HELLO.unpack(hello)
            if magic != MAGIC:
                raise TransferError(
                    f"not a replica of this cluster, or one of another version (magic 0x{magic:08X}, this master "
                    f"speaks 0x{MAGIC:08X}): run the same rocketspark version on every replica"
                )
            if self.secret is not None:
                check_auth(self.secret, challenge, hello, auth)
            self._check_hello(epoch, offset)
            older = self._by_replica.get(replica_id)
            if older is not None:
                older.cancel()  # it reconnected: the old connection is half-open, or about to close
            self._by_replica[replica_id] = task
            self.acks.report(replica_id, offset, self.store.log_max_offset)
            await self._run(reader, writer, replica_id, epoch, offset, wake)
        except TransferError as exc:
            log.warning("HA connection from %s ended: %s", peer, exc)
        except (OSError, EOFError, asyncio.IncompleteReadError) as exc:
            log.info("HA connection from %s closed: %s", peer, exc or type(exc).__name__)
        finally:
            self._wakeups.discard(wake)
            self._connections.discard(task)
            if self._by_replica.get(replica_id) is task:
                del self._by_replica[replica_id]
            writer.close()

    @staticmethod
    async def _read_hello(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
        hello = await reader.readexactly(HELLO.size)
        return hello, await reader.readexactly(AUTH_BYTES)

    def _check_hello(self, epoch: int, offset: int) -> None:
        role, low, high = self.role, self.store.log_min_offset, self.store.log_max_offset
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
        link = _Link(self.hearing(f"slave replica {replica_id}"), asyncio.Event(), offset)
        tasks = (
            asyncio.create_task(self._read_acks(reader, replica_id, link)),
            asyncio.create_task(self._push(writer, epoch, offset, wake, link)),
            asyncio.create_task(link.hearing.watch(wake.set)),  # wakes the push: a keepalive when idle
        )
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                task.result()  # the error that ended it, if any
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _read_acks(self, reader: asyncio.StreamReader, replica_id: int, link: _Link) -> None:
        """An ACK follows every PUSH, a keepalive too: silence means the slave is gone. A slave
        never holds more than was pushed to it: an ACK past that counts as what was pushed."""
        while True:
            (offset,) = ACK.unpack(await reader.readexactly(ACK.size))
            link.hearing.heard()
            link.acked.set()
            self.acks.report(replica_id, min(offset, link.pushed), self.store.log_max_offset)

    async def _push(
        self, writer: asyncio.StreamWriter, epoch: int, offset: int, wake: asyncio.Event, link: _Link
    ) -> None:
        """Push the log from ``offset`` as it grows; when woken with nothing new (the
        watchdog's tick), an empty frame: the keepalive.

        One frame is in flight at a time: the next is read once the slave acknowledged the
        last, so under load it carries every send stored meanwhile (as a Kafka follower's
        fetch does). A frame per send cost each side a socket write and a read per send.
        """
        while self.role.is_master and self.role.epoch == epoch:
            if self.store.log_segments and offset < self.store.log_min_offset:
                raise TransferError(
                    f"retention deleted the log before {self.store.log_min_offset} while a slave still needed it "
                    f"from {offset}"
                )
            chunk = self.store.read_chunk(offset, self.chunk_bytes)
            if not chunk:
                wake.clear()
                await wake.wait()
                chunk = self.store.read_chunk(offset, self.chunk_bytes)
            link.acked.clear()
            writer.write(_frame(offset, chunk, epoch, self.versions()))
            offset += len(chunk)
            link.pushed = offset
            await writer.drain()
            await link.acked.wait()


class LogClient:
    """A slave's connection to its master's HA port; its watchdog drops the connection when
    the master falls silent."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, epoch: int, hearing: Hearing | None = None
    ) -> None:
        self.reader = reader
        self.writer = writer
        self.epoch = epoch
        self.hearing = hearing or Hearing("the master")
        self._silence: TransferError | None = None
        self._watchdog = asyncio.get_running_loop().create_task(self._watch())

    @classmethod
    async def connect(
        cls,
        host: str,
        port: int,
        replica_id: int,
        epoch: int,
        offset: int,
        secret: str | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> LogClient:
        """Connect (over TLS with ``tls``, checking the master's certificate against ``host``)
        and introduce this replica."""
        opening = asyncio.open_connection(host, port, ssl=tls, server_hostname=host if tls is not None else None)
        reader, writer = await asyncio.wait_for(opening, SILENCE_S)
        challenge = await asyncio.wait_for(reader.readexactly(CHALLENGE_BYTES), SILENCE_S)
        hello = HELLO.pack(MAGIC, replica_id, epoch, offset)
        writer.write(hello + auth_frame(secret, challenge, hello))
        return cls(reader, writer, epoch)

    async def _watch(self) -> None:
        try:
            await self.hearing.watch(lambda: None)
        except TransferError as exc:
            self._silence = exc
            self.writer.transport.abort()  # the read waiting in receive ends

    async def receive(self, expected: int) -> tuple[bytes, tuple[int, int]]:
        """The next frame's bytes (empty for a keepalive), which must start at ``expected``,
        and the master's metadata versions."""
        self.hearing.listen(True)
        try:
            head = await self.reader.readexactly(PUSH.size)
            offset, size, crc, epoch, topics, mappings = PUSH.unpack(head)
            if size > MAX_PUSH_BYTES:
                raise TransferError(
                    f"a PUSH header claims {size} bytes, more than any master sends: not a master's frame"
                )
            body = await self.reader.readexactly(size) if size else b""
        except (OSError, asyncio.IncompleteReadError) as exc:
            if self._silence is None:
                raise
            raise self._silence from exc
        self.hearing.listen(False)
        if epoch != self.epoch:
            raise TransferError(f"the master pushes at epoch {epoch}, not {self.epoch} as this replica follows")
        if offset != expected:
            raise TransferError(f"the master pushes the log from {offset}, not from this replica's end {expected}")
        if zlib.crc32(body) != crc:
            raise TransferError(f"{size} bytes of the log from {offset} arrived damaged (CRC mismatch)")
        return body, (topics, mappings)

    def acknowledge(self, log_end: int) -> None:
        self.writer.write(ACK.pack(log_end))

    async def close(self) -> None:
        self._watchdog.cancel()
        self.writer.close()
        with contextlib.suppress(OSError):
            await self.writer.wait_closed()
