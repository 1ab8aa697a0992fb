"""Pieces of replication: the epoch file's common history, the master's ack tracker, and what a
slave accepts from the HA port."""

from __future__ import annotations

import asyncio
import socket
import time
import zlib
from pathlib import Path

import pytest

from broker.ha.acks import AckTracker
from broker.ha.epochs import EpochFile, common_end
from broker.ha.role import GroupView, Role
from broker.ha.transfer import (
    ACK,
    CHALLENGE_BYTES,
    HELLO,
    MAGIC,
    PUSH,
    Hearing,
    LogClient,
    LogServer,
    TransferError,
    auth_frame,
)
from rocketspark.errors import NotMasterError


def test_a_replica_that_shares_every_epoch_keeps_its_whole_log() -> None:
    history = [(1, 0), (2, 500)]
    assert common_end(history, 800, history, 900) == 800


def test_a_deposed_master_cuts_what_it_wrote_after_the_new_master_took_over() -> None:
    old_master = [(1, 0), (2, 500)]  # it went on writing in epoch 2 up to 1,000
    new_master = [(1, 0), (2, 500), (3, 700)]  # the group moved on at 700
    assert common_end(old_master, 1000, new_master, 1200) == 700


def test_a_replica_that_missed_an_epoch_keeps_up_to_the_last_one_it_shares() -> None:
    slave = [(1, 0)]  # it stopped copying during epoch 1, at 400
    master = [(1, 0), (3, 600)]
    assert common_end(slave, 400, master, 900) == 400
    assert common_end([(5, 0)], 100, master, 900) == 0  # nothing shared: start over


def test_the_epoch_file_records_new_epochs_only_and_survives_a_reload(tmp_path: Path) -> None:
    epochs = EpochFile(tmp_path / "epochs.json")
    epochs.load()
    epochs.begin(1, 0)
    epochs.begin(2, 300)
    epochs.begin(2, 300)  # the same term again: nothing to do
    epochs.begin(2, 900)  # taking office again in the same term: it began where it began
    with pytest.raises(ValueError, match="older than the last one recorded"):
        epochs.begin(1, 400)
    again = EpochFile(tmp_path / "epochs.json")
    again.load()
    assert again.entries == [(1, 0), (2, 300)] and again.last_epoch == 2
    again.truncate_after(200)
    assert again.entries == [(1, 0)]


def test_a_send_waits_for_enough_in_sync_slaves_and_no_others() -> None:
    async def scenario() -> tuple[bool, bool]:
        acks = AckTracker(max_lag_ms=10_000)
        acks.reset({1, 2})
        waiting = asyncio.ensure_future(acks.wait(100, {1, 2}, 1, timeout_s=2))
        acks.report(3, 100, 100)  # not a member: does not count
        await asyncio.sleep(0.01)
        assert not waiting.done()
        acks.report(2, 100, 100)
        first = await waiting
        second = await acks.wait(200, {1, 2}, 2, timeout_s=0.05)
        return first, second

    assert asyncio.run(scenario()) == (True, False)


def test_the_sync_state_set_takes_in_a_caught_up_slave_and_lets_a_lagging_one_go() -> None:
    acks = AckTracker(max_lag_ms=50)
    acks.reset({1})
    acks.report(1, 50, 100)  # behind, and it stays behind longer than the lag allowed
    time.sleep(0.1)
    acks.report(1, 60, 100)
    acks.report(2, 100, 100)  # caught up
    assert acks.in_sync({1}, 100) == {2}


async def _client_fed(frames: bytes, epoch: int = 3) -> LogClient:
    """A LogClient on one end of a real socket pair whose other end sent ``frames``."""
    ours, theirs = socket.socketpair()
    theirs.sendall(frames)
    theirs.close()
    reader, writer = await asyncio.open_connection(sock=ours)
    return LogClient(reader, writer, epoch)


def _frame(offset: int, body: bytes, epoch: int = 3, crc: int | None = None) -> bytes:
    return PUSH.pack(offset, len(body), zlib.crc32(body) if crc is None else crc, epoch, 1, 1) + body


def test_a_slave_takes_only_pushed_log_that_is_whole_in_place_and_from_its_master_s_epoch() -> None:
    async def scenario() -> None:
        good = await _client_fed(_frame(100, b"records") + _frame(107, b""))
        assert await good.receive(100) == (b"records", (1, 1))
        assert await good.receive(107) == (b"", (1, 1))  # a keepalive
        await good.close()
        for frames, expected, why in (
            (_frame(100, b"records", crc=1), 100, "arrived damaged"),
            (_frame(90, b"records"), 100, "not from this replica's end 100"),
            (_frame(100, b"records", epoch=2), 100, "at epoch 2, not 3"),
        ):
            client = await _client_fed(frames)
            with pytest.raises(TransferError, match=why):
                await client.receive(expected)
            await client.close()

    asyncio.run(scenario())


def test_a_slave_drops_a_master_that_falls_silent() -> None:
    async def scenario() -> None:
        ours, theirs = socket.socketpair()  # the master's end stays open and says nothing
        reader, writer = await asyncio.open_connection(sock=ours)
        client = LogClient(reader, writer, 3, Hearing("the master", keepalive_s=0.02, silence_s=0.1))
        with pytest.raises(TransferError, match=r"the master was silent for [\d.]+ s"):
            await asyncio.wait_for(client.receive(0), 5)
        await client.close()
        theirs.close()

    asyncio.run(scenario())


class _Log:
    """A master's log as the HA port reads it: bytes from offset 0."""

    def __init__(self) -> None:
        self.data = bytearray()

    @property
    def log_min_offset(self) -> int:
        return 0

    @property
    def log_max_offset(self) -> int:
        return len(self.data)

    @property
    def log_segments(self) -> int:
        return 1

    def read_chunk(self, offset: int, max_bytes: int) -> bytes:
        return bytes(self.data[offset : offset + max_bytes])


async def _frame_read(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    offset, size, _, _, _, _ = PUSH.unpack(await asyncio.wait_for(reader.readexactly(PUSH.size), 5))
    return offset, await reader.readexactly(size)


def _master(log: _Log, acks: AckTracker, secret: str | None = None) -> LogServer:
    role = Role("broker-a", 0, controller_mode=True, lease_ms=10_000)
    role.learn(GroupView("127.0.0.1:1", 0, 3, frozenset({0, 1})))
    return LogServer(log, role, acks, lambda: (1, 1), 1 << 20, lambda peer: Hearing(peer, 0.05, 0.5), secret)


async def _slave(
    port: int, secret: str | None = None, proof: bytes | None = None
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, bytes]:
    """A raw slave connection: it reads the challenge and sends HELLO with its proof (or the
    ``proof`` given); returns the proof it sent, too."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    challenge = await reader.readexactly(CHALLENGE_BYTES)
    hello = HELLO.pack(MAGIC, 1, 3, 0)
    sent = proof if proof is not None else auth_frame(secret, challenge, hello)
    writer.write(hello + sent)
    return reader, writer, sent


def test_the_master_keeps_one_frame_in_flight_so_sends_stored_meanwhile_travel_together() -> None:
    async def scenario() -> None:
        log, acks = _Log(), AckTracker(max_lag_ms=10_000)
        server = _master(log, acks)
        port = await server.start("127.0.0.1", 0)
        log.data += b"a" * 10
        reader, writer, _ = await _slave(port)
        assert await _frame_read(reader) == (0, b"a" * 10)
        for piece in (b"b" * 5, b"c" * 5):  # two sends stored while the first frame is unacknowledged
            log.data += piece
            server.appended()
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(reader.readexactly(1), 0.2)
        writer.write(ACK.pack(10))
        assert await _frame_read(reader) == (10, b"b" * 5 + b"c" * 5)
        writer.write(ACK.pack(10_000))  # more than was pushed: counts as what was pushed
        assert await _frame_read(reader) == (20, b"")  # idle: a keepalive from the watchdog's tick
        assert acks.slaves[1].offset == 20
        # a slave that stops acknowledging is dropped after the silence period
        assert await asyncio.wait_for(reader.read(), 5) == b""
        writer.close()
        await server.stop()

    asyncio.run(scenario())


def test_a_master_with_security_on_takes_only_a_fresh_proof_of_the_cluster_secret() -> None:
    async def scenario() -> None:
        log, acks = _Log(), AckTracker(max_lag_ms=10_000)
        log.data += b"a" * 10
        server = _master(log, acks, secret="s" * 24)
        port = await server.start("127.0.0.1", 0)
        reader, writer, proof = await _slave(port, secret="s" * 24)
        assert await _frame_read(reader) == (0, b"a" * 10)
        writer.close()
        for kind, kwargs in (("wrong secret", {"secret": "x" * 24}), ("none", {}), ("replayed", {"proof": proof})):
            reader, writer, _ = await _slave(port, **kwargs)
            assert await asyncio.wait_for(reader.read(), 5) == b"", kind  # closed without a frame
            writer.close()
        await server.stop()

    asyncio.run(scenario())


def test_a_replica_never_leads_an_epoch_its_log_held_before_it_restarted_and_its_lease_runs_from_the_send() -> None:
    role = Role("broker-a", 0, controller_mode=True, lease_ms=2000, min_epoch=4)  # its log held epoch 3
    role.learn(GroupView("127.0.0.1:1", 0, 3, frozenset({0})))
    assert role.named_master and not role.is_master  # the old term, resumed: refused
    with pytest.raises(NotMasterError):
        role.check_writable()
    sent = time.monotonic() - 1.9  # the heartbeat went out 1.9 s ago; its answer came only now
    role.learn(GroupView("127.0.0.1:1", 0, 4, frozenset({0})), sent)
    assert role.is_master and role.lease_until == pytest.approx(sent + 2.0)
    time.sleep(0.15)
    with pytest.raises(NotMasterError, match="lease"):
        role.check_writable()
