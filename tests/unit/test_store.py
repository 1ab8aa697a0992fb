"""The message store on real files with tiny segments, including files damaged on purpose."""

from __future__ import annotations

import asyncio
import errno
import os
import shutil
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from broker.config import BrokerConfig
from broker.store.mappedfile import Sync
from broker.store.reading import GetStatus
from broker.store.recovery import RecoveryReport
from broker.store.store import MessageStore
from broker.store.values import StoreConfig
from rocketspark.codec.layout import HEADER_SIZE, tag_hash
from tests.helpers import decode_messages, eventually, put_batch

SEGMENT = 1024  # a ~100-byte record: about ten per segment, so files roll all the time
ENTRIES = 8  # consume-queue entries per file


def config(path: Path, **overrides: object) -> StoreConfig:
    values: dict[str, object] = {"path": path, "segment_bytes": SEGMENT, "queue_entries_per_file": ENTRIES}
    values.update(overrides)
    return replace(BrokerConfig().store_config(), **values)  # type: ignore[arg-type]


def put(store: MessageStore, topic: str, queue_id: int, body: bytes, tags: str | None = None) -> int:
    return put_batch(store, topic, queue_id, [body], tags).first_queue_offset


def read_all(store: MessageStore, topic: str, queue_id: int) -> list[tuple[int, bytes]]:
    out: list[tuple[int, bytes]] = []
    offset = store.min_offset(topic, queue_id)
    while True:
        result = store.get(topic, queue_id, offset, max_messages=7, max_bytes=1 << 20)
        if result.status is not GetStatus.FOUND:
            return out
        out += [(m.queue_offset, m.body) for m in decode_messages(result.body, topic) if m.queue_offset >= offset]
        offset = result.next_offset


def fill(store: MessageStore, count: int = 120, queues: int = 3) -> dict[int, list[tuple[int, bytes]]]:
    expected: dict[int, list[tuple[int, bytes]]] = {q: [] for q in range(queues)}
    for i in range(count):
        q = i % queues
        body = f"message-{i:04d}".encode() * 3
        expected[q].append((put(store, "orders", q, body), body))
    return expected


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "store"


def open_store(path: Path, *, sync: Sync = os.fsync, **overrides: object) -> MessageStore:
    store = MessageStore(config(path, **overrides), sync=sync)
    store.open()
    return store


class Disk:
    """The store's ``Sync``: fsync, unless told to fail (an I/O error) or to stall the next one
    until released (a slow disk; the flusher holds the store meanwhile)."""

    def __init__(self) -> None:
        self.failing = False
        self.stall_next = False
        self.stalled, self.release = threading.Event(), threading.Event()

    def __call__(self, fd: int, /) -> None:
        if self.failing:
            raise OSError(errno.EIO, "I/O error")
        if self.stall_next:
            self.stall_next = False
            self.stalled.set()
            self.release.wait(10)
        os.fsync(fd)


def reopen(path: Path, *, full_verify: bool = False) -> tuple[MessageStore, RecoveryReport]:
    """Open the store at ``path`` again, as a restarted broker does, with what recovery found."""
    store = MessageStore(config(path))
    return store, store.open(full_verify=full_verify)


def assert_reads(store: MessageStore, expected: dict[int, list[tuple[int, bytes]]]) -> None:
    """Every queue of topic "orders" reads back exactly ``expected[queue]``: (offset, body) in order."""
    for q, msgs in expected.items():
        assert read_all(store, "orders", q) == msgs, f"queue {q}"


def test_messages_read_back_in_order_across_hundreds_of_segment_rolls(store_path: Path) -> None:
    store = open_store(store_path)
    expected = fill(store, count=600)
    assert len(store.commitlog.segments) > 50
    assert_reads(store, expected)
    store.close()


def test_a_clean_restart_keeps_every_message_and_offset(store_path: Path) -> None:
    store = open_store(store_path)
    expected = fill(store)
    store.close()
    store, report = reopen(store_path)
    assert not report.abnormal and not report.damage
    assert_reads(store, expected)
    assert put(store, "orders", 0, b"next") == len(expected[0])
    store.close()


def test_pull_statuses_at_and_beyond_the_queue_ends(store_path: Path) -> None:
    store = open_store(store_path)
    assert store.get("orders", 0, 0, max_messages=1, max_bytes=100).status is GetStatus.NO_MATCHED_LOGIC_QUEUE
    assert store.get("orders", 0, 7, max_messages=1, max_bytes=100).status is GetStatus.OFFSET_OVERFLOW_BADLY
    fill(store, count=9)
    hit = store.get("orders", 0, 3, max_messages=10, max_bytes=1 << 20)
    assert (hit.status, hit.next_offset, hit.max_offset) == (GetStatus.OFFSET_OVERFLOW_ONE, 3, 3)
    bad = store.get("orders", 0, 50, max_messages=10, max_bytes=1 << 20)
    assert (bad.status, bad.next_offset) == (GetStatus.OFFSET_OVERFLOW_BADLY, 3)
    store.close()


def test_max_bytes_limits_a_read_but_always_returns_one_message(store_path: Path) -> None:
    store = open_store(store_path)
    fill(store, count=30, queues=1)
    one = store.get("orders", 0, 0, max_messages=30, max_bytes=1)
    assert (one.status, one.count, one.next_offset) == (GetStatus.FOUND, 1, 1)
    some = store.get("orders", 0, 0, max_messages=30, max_bytes=500)
    assert 1 < some.count < 30 and len(some.body) <= 500
    store.close()


def test_tag_filter_skips_other_tags_and_advances_past_them(store_path: Path) -> None:
    store = open_store(store_path)
    for i in range(20):
        put(store, "t", 0, f"m{i}".encode(), tags="A" if i % 4 == 0 else "B")
    result = store.get("t", 0, 0, max_messages=100, max_bytes=1 << 20, tag_hashes=frozenset({tag_hash(b"A")}))
    assert [m.body for m in decode_messages(result.body, "t")] == [f"m{i}".encode() for i in range(0, 20, 4)]
    assert result.next_offset == 20
    none = store.get("t", 0, 1, max_messages=2, max_bytes=1 << 20, tag_hashes=frozenset({tag_hash(b"C")}))
    assert none.status is GetStatus.NO_MATCHED_MESSAGE and none.next_offset > 1
    store.close()


def test_offset_for_time_finds_the_first_message_stored_at_or_after_it(store_path: Path) -> None:
    store = open_store(store_path)
    put(store, "t", 0, b"early")
    time.sleep(0.02)
    middle = int(time.time() * 1000)
    time.sleep(0.02)
    put(store, "t", 0, b"late")
    assert store.offset_for_time("t", 0, 0) == 0
    assert store.offset_for_time("t", 0, middle) == 1
    assert store.offset_for_time("t", 0, middle + 60_000) == 2
    store.close()


def _last_record(store: MessageStore) -> tuple[int, int]:
    cq = store.queues[("orders", (119) % 3)]
    entry = cq.entry(cq.max_slot - 1)
    return entry.phys, entry.size


def test_recovery_cuts_a_truncated_last_record_and_keeps_the_rest(store_path: Path) -> None:
    store = open_store(store_path)
    expected = fill(store)
    phys, size = _last_record(store)
    store.close()
    segment = store_path / "commitlog" / f"{phys - phys % SEGMENT:020d}"
    os.truncate(segment, phys % SEGMENT + size // 2)

    store, report = reopen(store_path)
    assert len(report.damage) == 1 and report.damage[0].start == phys
    assert report.log_end == phys
    lost_queue = 119 % 3
    expected[lost_queue].pop()
    assert_reads(store, expected)
    store.close()


def test_recovery_after_a_crash_cuts_a_torn_tail(store_path: Path, tmp_path: Path) -> None:
    store = open_store(store_path)
    expected = fill(store)
    phys, size = _last_record(store)
    crash_image = tmp_path / "crashed"
    shutil.copytree(store_path, crash_image)  # what the disk holds if the process dies now
    store.close()
    segment = crash_image / "commitlog" / f"{phys - phys % SEGMENT:020d}"
    with open(segment, "r+b") as f:
        f.seek(phys % SEGMENT + size - 5)
        f.write(b"\xff\xff\xff\xff\xff")

    store, report = reopen(crash_image)
    assert report.abnormal
    assert [d.start for d in report.damage] == [phys]
    expected[119 % 3].pop()
    assert_reads(store, expected)
    store.close()


def test_recovery_cuts_a_corrupt_record_mid_log_and_keeps_the_records_after_it(store_path: Path) -> None:
    store = open_store(store_path)
    expected = fill(store)
    victim = store.queues[("orders", 1)].entry(10)  # a batch of one: slot 10 holds offset 10
    victim_phys, victim_size = victim.phys, victim.size
    store.close()
    segment = store_path / "commitlog" / f"{victim_phys - victim_phys % SEGMENT:020d}"
    with open(segment, "r+b") as f:
        f.seek(victim_phys % SEGMENT + HEADER_SIZE + 12)
        f.write(b"\x00garbage\x00")

    store, report = reopen(store_path, full_verify=True)
    assert [(d.start, d.end) for d in report.damage] == [(victim_phys, victim_phys + victim_size)]
    assert report.tombstones == 1
    del expected[1][10]  # the damaged record is gone; the ones after it are kept
    assert_reads(store, expected)
    assert put(store, "orders", 1, b"after") == 40  # offsets continue; the lost one is not reused
    store.close()

    store, again = reopen(store_path, full_verify=True)
    assert again.damage == []  # the gap marker makes later scans clean
    store.close()


def test_recovery_rebuilds_a_queue_whose_middle_file_was_deleted(store_path: Path) -> None:
    store = open_store(store_path)
    expected = fill(store)
    store.close()
    (store_path / "consumequeue" / "orders" / "2" / f"{ENTRIES:020d}").unlink()

    store, _report = reopen(store_path)
    assert_reads(store, expected)  # the queue is checked, and rebuilt, when it is first used
    assert store.stats.queues_rebuilt == 1
    store.close()


def test_a_queue_whose_oldest_file_was_deleted_is_rebuilt_not_shortened(store_path: Path) -> None:
    store = open_store(store_path)
    expected = fill(store)
    store.close()
    (store_path / "consumequeue" / "orders" / "1" / f"{0:020d}").unlink()

    store, _report = reopen(store_path)
    assert store.min_offset("orders", 1) == 0  # not the first remaining file's start
    assert_reads(store, expected)
    assert store.stats.queues_rebuilt == 1
    store.close()


def test_recovery_rebuilds_a_queue_whose_last_file_or_whole_directory_was_deleted(store_path: Path) -> None:
    store = open_store(store_path)
    expected = fill(store)
    store.close()
    files = sorted((store_path / "consumequeue" / "orders" / "0").iterdir())
    files[-1].unlink()
    shutil.rmtree(store_path / "consumequeue" / "orders" / "1")

    store, _report = reopen(store_path)
    assert_reads(store, expected)
    assert store.stats.queues_rebuilt == 2
    store.close()


def test_retention_deletes_old_segments_and_moves_min_offsets(store_path: Path) -> None:
    store = open_store(store_path, retention_ms=60_000)
    fill(store, count=60, queues=1)
    old = store.commitlog.segments[:-2]
    for segment in old:
        segment.touch(time.time() - 3600)
    deleted = store.delete_expired()
    assert deleted == len(old)
    low = store.min_offset("orders", 0)
    assert low > 0
    result = store.get("orders", 0, 0, max_messages=5, max_bytes=1 << 20)
    assert (result.status, result.next_offset) == (GetStatus.OFFSET_TOO_SMALL, low)
    assert read_all(store, "orders", 0)[0][0] == low
    store.close()


def test_the_periodic_retention_round_skips_while_the_flusher_holds_the_store(store_path: Path) -> None:
    disk = Disk()
    store = open_store(store_path, sync=disk, retention_ms=60_000, flush_interval_ms=600_000)  # flusher idles
    fill(store, count=60, queues=1)
    old = store.commitlog.segments[:-2]
    for segment in old:
        segment.touch(time.time() - 3600)
    disk.stall_next = True
    # A sync-flush send's wait wakes the flusher, which stalls in its fsync, holding the store.
    flushing = threading.Thread(target=asyncio.run, args=(store.flusher.wait_flushed(store.log_max_offset),))
    flushing.start()
    try:
        assert disk.stalled.wait(5)
        assert store.delete_expired(blocking=False) == 0
        assert store.commitlog.segments[: len(old)] == old
    finally:
        disk.release.set()
        flushing.join()
    # the flusher finishes its round (the queues, the checkpoint); the next retention round works
    eventually(lambda: store.delete_expired(blocking=False) == len(old), timeout_s=5)
    store.close()


def test_offsets_survive_a_restart_after_every_record_of_a_queue_expired(store_path: Path) -> None:
    store = open_store(store_path, retention_ms=1000)
    fill(store, count=30, queues=1)
    put(store, "other", 0, b"x" * 600)  # roll so that the queue's segments are all sealed
    put(store, "other", 0, b"x" * 600)
    for segment in store.commitlog.segments[:-1]:
        segment.touch(time.time() - 3600)
    store.delete_expired()
    assert store.min_offset("orders", 0) == store.max_offset("orders", 0) == 30
    store.close()
    store = open_store(store_path, retention_ms=1000)
    assert put(store, "orders", 0, b"new") == 30
    store.close()


def test_sync_flush_acknowledges_only_after_the_log_is_on_disk(store_path: Path) -> None:
    store = open_store(store_path, flush_mode="sync", flush_interval_ms=10_000)

    async def send() -> bool:
        result = put_batch(store, "t", 0, [b"durable"])
        return await store.flusher.wait_flushed(result.end_offset)

    assert asyncio.run(send()) is True
    assert store.flushed_offset >= store.commitlog.max_offset
    store.close()


def test_bytes_stored_counts_the_records_not_the_blank_filling_a_segment(store_path: Path) -> None:
    store = open_store(store_path)
    results = [put_batch(store, "orders", 0, [b"x" * 300]) for _ in range(6)]  # two records a segment
    assert results[0].first_offset // SEGMENT != results[-1].first_offset // SEGMENT
    record_size = results[0].end_offset - results[0].first_offset
    assert record_size > HEADER_SIZE + 300
    assert store.stats.bytes_put == 6 * record_size
    store.close()


def test_a_consume_queue_whose_fsync_failed_is_flushed_again_next_time(store_path: Path) -> None:
    disk = Disk()
    store = open_store(store_path, sync=disk, flush_interval_ms=600_000)  # flushed by hand below
    put(store, "orders", 0, b"x")
    cq = store.queues[("orders", 0)]
    disk.failing = True
    with pytest.raises(OSError, match="I/O error"):
        cq.flush()
    disk.failing = False
    cq.flush()
    assert all(f.flushed == f.wrote for f in cq.files)
    store.close()
