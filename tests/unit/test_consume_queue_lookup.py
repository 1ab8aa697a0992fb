"""``ConsumeQueue.slot_for`` reads the newest entries at once before it searches the rest; it must
answer as a search of every entry would, for any offset: in the tail or before it, across files,
past the ends, with tombstones and after retention moved the queue's start into a file. The
entries ``find`` hands a pull with the slot must be the queue's own from that slot on."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from broker.store.consumequeue import ENTRY_SIZE, TAIL_SLOTS, ConsumeQueue


def slot_by_scan(cq: ConsumeQueue, offset: int) -> int:
    """The first slot whose batch ends after ``offset``, every entry read (``max_slot``: none)."""
    for slot in range(cq.min_slot, cq.max_slot):
        if cq.entry(slot).end > offset:
            return slot
    return cq.max_slot


def filled(path: Path, batches: int, per_file: int, seed: int) -> ConsumeQueue:
    """A queue of ``batches`` batches of 1-5 messages, some of them tombstones."""
    rng = random.Random(seed)
    cq = ConsumeQueue(path, "orders", 0, per_file)
    base = 0
    for k in range(batches):
        count = rng.randint(1, 5)
        size = 0 if rng.random() < 0.05 else 200
        cq.append_entry(k * 200, size, 0, base, count, 1_000 + k)
        base += count
    return cq


@pytest.mark.parametrize(("batches", "per_file"), [(1, 100), (10, 100), (TAIL_SLOTS + 1, 1000), (500, 37), (500, 1000)])
def test_every_offset_finds_the_slot_a_scan_finds(tmp_path: Path, batches: int, per_file: int) -> None:
    cq = filled(tmp_path / "q", batches, per_file, seed=batches * per_file)
    handed = 0
    for offset in range(-1, cq.max_offset + 3):
        slot, entries = cq.find(offset)
        assert slot == cq.slot_for(offset) == slot_by_scan(cq, offset), offset
        assert len(entries) % ENTRY_SIZE == 0
        assert entries == cq.read(slot, len(entries) // ENTRY_SIZE), offset
        handed += bool(entries)
    # a follower reads no entry twice: every offset the newest entries (read at once) hold is
    # handed its entries
    tail = max(cq.max_slot - TAIL_SLOTS, (cq.max_slot - 1) // per_file * per_file)
    assert handed >= cq.entry(cq.max_slot - 1).end - cq.entry(tail).base


def test_after_retention_moved_the_start_into_a_file(tmp_path: Path) -> None:
    cq = filled(tmp_path / "q", 300, 40, seed=5)
    cq.delete_expired(log_min_offset=130 * 200 + 1)  # the start moves to slot 131, inside a file
    assert cq.min_slot == 131
    for offset in range(cq.min_offset - 3, cq.max_offset + 3):
        assert cq.slot_for(offset) == slot_by_scan(cq, offset), offset


def test_after_retention_moved_the_start_into_the_newest_entries(tmp_path: Path) -> None:
    cq = filled(tmp_path / "q", 300, 1000, seed=6)
    cq.delete_expired(log_min_offset=(300 - TAIL_SLOTS // 2) * 200)  # the start lies among the newest entries
    assert cq.max_slot - cq.min_slot < TAIL_SLOTS
    for offset in range(cq.min_offset - 3, cq.max_offset + 3):
        assert cq.slot_for(offset) == slot_by_scan(cq, offset), offset


def test_a_reopened_queue_finds_the_same_slots(tmp_path: Path) -> None:
    cq = filled(tmp_path / "q", 250, 37, seed=8)
    cq.flush()
    cq.close_files()
    again = ConsumeQueue(tmp_path / "q", "orders", 0, 37)
    again.load()  # its last file's end read back from the file
    assert (again.min_slot, again.max_slot) == (0, 250)
    for offset in range(-1, again.max_offset + 3):
        assert again.slot_for(offset) == slot_by_scan(again, offset), offset


def test_an_empty_queue_answers_its_end(tmp_path: Path) -> None:
    cq = ConsumeQueue(tmp_path / "q", "orders", 0, 100)
    assert cq.slot_for(0) == cq.slot_for(5) == 0
