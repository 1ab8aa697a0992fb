"""A slave's store copying its master's log in arbitrary chunks: byte-identical logs, the same
queues and offsets, and a damaged chunk refused."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from broker.store.follow import WINDOW_BYTES
from broker.store.store import MessageStore
from rocketspark.codec.layout import BATCH_MAGIC, RecordCorrupted
from rocketspark.protocol.types import MessageExt
from tests.helpers import decode_messages
from tests.unit.test_store import SEGMENT, assert_reads, fill, open_store, put, read_all


def copy_all(master: MessageStore, slave: MessageStore, rng: random.Random, largest: int = 300) -> None:
    """Ship the master's log from the slave's end in chunks of random sizes, as a slave pulls."""
    while slave.commitlog.max_offset < master.commitlog.max_offset:
        offset = slave.commitlog.max_offset
        chunk = master.read_chunk(offset, rng.randint(1, largest))
        assert chunk
        slave.append_copied(offset, chunk)
        if rng.random() < 0.3:
            slave.index_copied()
    slave.index_copied()


def log_bytes(store: MessageStore) -> list[bytes]:
    return [s.read(0, s.wrote) for s in store.commitlog.segments]


def test_a_slave_copying_in_random_chunks_ends_byte_identical_with_the_same_queues(tmp_path: Path) -> None:
    master, slave = open_store(tmp_path / "m"), open_store(tmp_path / "s")
    expected = fill(master, count=300)
    copy_all(master, slave, random.Random(7))
    assert log_bytes(slave) == log_bytes(master) and len(master.commitlog.segments) > 20
    assert_reads(slave, expected)
    assert slave.stats.messages_copied == 300
    more = fill(master, count=30)  # it goes on from where it stopped
    copy_all(master, slave, random.Random(8))
    for q in more:
        assert read_all(slave, "orders", q)[-10:] == read_all(master, "orders", q)[-10:]
    master.close()
    slave.close()


def test_a_damaged_chunk_is_refused_and_nothing_from_it_is_kept(tmp_path: Path) -> None:
    master, slave = open_store(tmp_path / "m"), open_store(tmp_path / "s")
    fill(master, count=20)
    chunk = bytearray(master.read_chunk(0, SEGMENT))
    chunk[_starts(chunk)[2] + 30] ^= 0xFF  # the third record's own log offset: it is not where it says
    slave.append_copied(0, bytes(chunk))
    with pytest.raises(RecordCorrupted):
        slave.index_copied()
    good = slave.commitlog.max_offset
    assert good == _starts(chunk)[2] and slave.read_chunk(0, SEGMENT) == master.read_chunk(0, good)
    copy_all(master, slave, random.Random(1))  # asked again, it heals
    assert log_bytes(slave) == log_bytes(master)
    master.close()
    slave.close()


def test_a_copied_log_must_start_at_a_segment_boundary(tmp_path: Path) -> None:
    slave = open_store(tmp_path / "s")
    with pytest.raises(ValueError, match=r"segment_bytes .* must be the same on every replica"):
        slave.append_copied(100, b"x" * 10)
    slave.close()


def test_a_log_cut_back_drops_the_entries_past_it_and_copies_on_from_there(tmp_path: Path) -> None:
    master, slave = open_store(tmp_path / "m"), open_store(tmp_path / "s")
    fill(master, count=60)
    copy_all(master, slave, random.Random(3))
    boundary = master.commitlog.segments[2].base
    slave.truncate_log(boundary)
    assert slave.commitlog.max_offset == boundary
    assert all(m.commitlog_offset < boundary for q in range(3) for m in _messages(slave, q))
    copy_all(master, slave, random.Random(4))
    assert log_bytes(slave) == log_bytes(master)
    for q in range(3):
        assert read_all(slave, "orders", q) == read_all(master, "orders", q)
    master.close()
    slave.close()


def _messages(store: MessageStore, queue_id: int) -> list[MessageExt]:
    result = store.get("orders", queue_id, store.min_offset("orders", queue_id), max_messages=1000, max_bytes=1 << 20)
    return decode_messages(result.body, "orders") if result.count else []


def test_a_slave_taking_office_cuts_a_record_it_holds_only_in_part_and_writes_on_from_there(tmp_path: Path) -> None:
    master, slave = open_store(tmp_path / "m"), open_store(tmp_path / "s")
    fill(master, count=4, queues=1)  # the next record still fits in the first segment
    whole = master.commitlog.max_offset
    put(master, "orders", 0, b"never finished")
    slave.append_copied(0, master.read_chunk(0, master.commitlog.max_offset - 3))  # the old master died mid-send
    slave.stop_copying()
    assert slave.commitlog.max_offset == whole and slave.follower is None
    assert put(slave, "orders", 0, b"first of the new master") == 4
    assert [body for _, body in read_all(slave, "orders", 0)][-1] == b"first of the new master"
    master.close()
    slave.close()


def test_an_empty_slave_copies_from_the_master_s_first_segment_not_from_zero(tmp_path: Path) -> None:
    master, slave = open_store(tmp_path / "m"), open_store(tmp_path / "s")
    fill(master, count=60, queues=1)
    floor = master.commitlog.segments[3].base  # retention took the older ones
    offset = floor
    while offset < master.commitlog.max_offset:
        chunk = master.read_chunk(offset, 700)
        slave.append_copied(offset, chunk)
        offset += len(chunk)
    slave.index_copied()
    later = [m for m in _messages(slave, 0)]
    assert later and later[0].commitlog_offset >= floor
    assert [m.body for m in later] == [m.body for m in _messages(master, 0) if m.commitlog_offset >= floor]
    master.close()
    slave.close()


def test_records_in_front_of_a_damaged_one_are_indexed_and_kept(tmp_path: Path) -> None:
    master, slave = open_store(tmp_path / "m"), open_store(tmp_path / "s")
    fill(master, count=8, queues=1)
    segment_end = master.commitlog.segments[0].wrote
    chunk = bytearray(master.read_chunk(0, SEGMENT))
    third = sum(int.from_bytes(chunk[p : p + 4], "big") for p in _starts(chunk)[:2])
    chunk[third + 30] ^= 0xFF  # the third record's own log offset: it is not where it says
    slave.append_copied(0, bytes(chunk[:segment_end]))
    with pytest.raises(RecordCorrupted):
        slave.index_copied()
    assert slave.commitlog.max_offset == third
    assert len(_messages(slave, 0)) == 2


def _starts(buf: bytearray) -> list[int]:
    starts, pos = [], 0
    while pos < len(buf) and int.from_bytes(buf[pos + 4 : pos + 8], "big") == BATCH_MAGIC:
        starts.append(pos)
        pos += int.from_bytes(buf[pos : pos + 4], "big")
    return starts


def test_a_record_larger_than_the_index_window_is_indexed(tmp_path: Path) -> None:
    master = open_store(tmp_path / "m", segment_bytes=4 << 20)
    slave = open_store(tmp_path / "s", segment_bytes=4 << 20)
    put(master, "orders", 0, b"small")
    put(master, "orders", 0, b"L" * (WINDOW_BYTES + 1000))
    put(master, "orders", 0, b"after")
    copy_all(master, slave, random.Random(5), largest=600_000)
    assert [len(body) for _, body in read_all(slave, "orders", 0)] == [5, WINDOW_BYTES + 1000, 5]
    master.close()
    slave.close()
