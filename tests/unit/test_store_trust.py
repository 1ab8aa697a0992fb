"""The store trusts nothing on disk: consume-queue entries are checked against their records,
truncated sealed segments are found at start-up, and metadata of the wrong shape is refused."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest

from broker.metadata import TopicsFile
from broker.store.consumequeue import ENTRY, ENTRY_SIZE
from broker.store.metafile import MetadataCorrupted, read_json
from broker.store.store import MessageStore
from rocketspark.errors import QueueRebuiltError, StoreDamagedError
from tests.unit.test_store import ENTRIES, SEGMENT, assert_reads, fill, open_store, put, read_all, reopen


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "store"


def queue_file(store_path: Path, queue_id: int, offset: int) -> tuple[Path, int]:
    """The file holding ``offset`` of orders/``queue_id`` and the entry's position in it."""
    first = offset - offset % ENTRIES
    return store_path / "consumequeue" / "orders" / str(queue_id) / f"{first:020d}", (offset - first) * ENTRY_SIZE


def write_entry(store_path: Path, queue_id: int, offset: int, entry: bytes) -> None:
    path, pos = queue_file(store_path, queue_id, offset)
    fd = os.open(path, os.O_WRONLY)
    try:
        os.pwrite(fd, entry, pos)
    finally:
        os.close(fd)


def read_entry(store: MessageStore, queue_id: int, offset: int) -> bytes:
    return store.queues[("orders", queue_id)].read(offset, 1)


def test_an_entry_copied_from_another_queue_is_refused_and_the_queue_rebuilt(store_path: Path) -> None:
    store = open_store(store_path)
    expected = fill(store)
    write_entry(store_path, 0, 13, read_entry(store, 1, 13))  # a valid record, of queue 1

    with pytest.raises(QueueRebuiltError, match=r"orders/0 at queue offset 13.*belongs to orders/1"):
        store.get("orders", 0, 10, max_messages=10, max_bytes=1 << 20)
    assert store.stats.index_mismatches == 1 and store.stats.queues_rebuilt == 1
    assert_reads(store, expected)  # never another queue's message: the rebuilt queue is right
    store.close()


def test_garbage_in_an_entry_is_an_error_not_an_empty_found(store_path: Path) -> None:
    store = open_store(store_path)
    expected = fill(store)
    write_entry(store_path, 2, 5, ENTRY.pack(123_456_789, 77, 0, 5, 1, 0))  # points past the log's end

    with pytest.raises(QueueRebuiltError, match=r"orders/2 at queue offset 5.*past the end of the commit log"):
        store.get("orders", 2, 5, max_messages=1, max_bytes=1 << 20)
    assert_reads(store, expected)
    store.close()


def test_an_entry_that_disagrees_again_right_after_a_rebuild_names_the_damage(store_path: Path) -> None:
    store = open_store(store_path)
    fill(store)
    phys = store.queues[("orders", 0)].entry(3).phys
    segment = store.commitlog.segment_for(phys)
    assert segment is not None
    segment.write_at(phys - segment.base + 4, b"\xde\xad\xbe\xef")  # the record's own magic is gone

    with pytest.raises(QueueRebuiltError):
        store.get("orders", 0, 3, max_messages=1, max_bytes=1 << 20)
    # The rebuild cannot index a record that is not there: a tombstone takes its offset, and
    # the message is reported lost in the log. A wrong entry made by hand again is refused
    # without another full scan.
    write_entry(store_path, 0, 4, read_entry(store, 1, 4))
    with pytest.raises(StoreDamagedError, match="rebuilt from the commit log 0 s ago already"):
        store.get("orders", 0, 4, max_messages=1, max_bytes=1 << 20)
    store.close()


def test_a_truncated_sealed_segment_after_a_clean_stop_is_found_and_reported(store_path: Path) -> None:
    store = open_store(store_path)
    expected = fill(store, count=200)
    store.close()
    victim = sorted((store_path / "commitlog").iterdir())[3]
    os.truncate(victim, SEGMENT // 2)

    store, report = reopen(store_path)
    base = int(victim.name)
    assert any(d.start >= base and d.end == base + SEGMENT for d in report.damage), report.damage
    assert report.tombstones > 0  # the lost records keep their offsets; nothing after them moves
    kept = {q: [m for m in msgs if m in dict.fromkeys(read_all_pairs(store, q))] for q, msgs in expected.items()}
    lost = sum(len(expected[q]) - len(kept[q]) for q in expected)
    assert 0 < lost == report.tombstones
    assert_reads(store, kept)
    store.close()


def read_all_pairs(store: MessageStore, queue_id: int) -> list[tuple[int, bytes]]:
    return read_all(store, "orders", queue_id)


@pytest.mark.parametrize(
    ("content", "field"),
    [("[]", "Expected `object`, got `array`"), ('{"topics": [{"name": "a", "r": 1}]}', "`w` - at `$.topics[0]`")],
)
def test_metadata_of_the_wrong_shape_is_refused_naming_the_file_and_field(
    tmp_path: Path, content: str, field: str
) -> None:
    path = tmp_path / "topics.json"
    path.write_text(content)
    with pytest.raises(MetadataCorrupted, match=r"topics\.json does not have the shape.*" + _escape(field)):
        read_json(path, default=None, shape=TopicsFile)
    json.loads(content)  # valid JSON all the same


def _escape(text: str) -> str:
    return re.escape(text)


def test_the_scrub_finds_and_marks_damage_in_a_sealed_segment_before_a_reader_does(store_path: Path) -> None:
    store = open_store(store_path)
    expected = fill(store, count=200)
    phys = store.queues[("orders", 2)].entry(20).phys
    segment = store.commitlog.segment_for(phys)
    assert segment is not None and segment is not store.commitlog.segments[-1]
    segment.write_at(phys - segment.base + 110, b"rot")  # a flipped sector inside a record's body

    store.scrub.scrub_pass()
    stats = store.scrub.stats
    assert stats.passes == 1 and stats.damaged_segments == 1
    assert stats.segments == len(store.commitlog.segments) and stats.bytes > 0  # the open one too
    assert "CRC mismatch" in stats.damage[0] and segment.path.name in stats.damage[0]
    store.scrub.scrub_pass()
    assert store.scrub.stats.damaged_segments == 1  # marked as a gap: not found again

    with pytest.raises(QueueRebuiltError, match="orders/2 at queue offset 20"):
        read_all(store, "orders", 2)
    del expected[2][20]  # the one damaged record is lost, and said to be; the rest reads back
    assert_reads(store, expected)
    store.close()


def test_the_scrub_reports_damage_in_the_open_segment_without_cutting_under_the_writer(store_path: Path) -> None:
    store = open_store(store_path)
    fill(store, count=30)
    last = store.commitlog.segments[-1]
    while store.flushed_offset < last.end:  # the scrub checks only what is on disk
        time.sleep(0.05)
    last.write_at(100, b"rot")

    store.scrub.scrub_pass()
    assert store.scrub.stats.damaged_segments == 1
    assert last.path.name in store.scrub.stats.damage[0] and "CRC mismatch" in store.scrub.stats.damage[0]
    assert put(store, "orders", 0, b"after") == 10  # the writer goes on
    store.close()
