"""Batch records in the store, on real files with tiny segments: one record and one consume-queue
entry per batch, per-message offsets found inside batches, the tag summary, compression, and
damage to a batch's header or body cut out with the batches around it kept."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.store.reading import GetStatus
from broker.store.store import MessageStore
from rocketspark.codec.build import tag_summary_of
from rocketspark.codec.columns import decode
from rocketspark.codec.layout import LZ4, MIXED, ZSTD, tag_hash
from tests.helpers import batch_record, decode_messages, put_batch
from tests.unit.test_store import SEGMENT, open_store, reopen


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "store"


def bodies(prefix: str, n: int, size: int = 20) -> list[bytes]:
    return [f"{prefix}-{i:03d}".encode().ljust(size, b".") for i in range(n)]


def read_from(store: MessageStore, topic: str, offset: int, **kwargs: object) -> list[tuple[int, bytes]]:
    """What a consumer reading from ``offset`` gets: whole batches, trimmed to start there."""
    result = store.get(topic, 0, offset, max_messages=10_000, max_bytes=1 << 20, **kwargs)  # type: ignore[arg-type]
    return [(m.queue_offset, m.body) for m in decode_messages(result.body, topic) if m.queue_offset >= offset]


def test_a_batch_is_one_record_and_one_entry_and_its_messages_keep_their_own_offsets(store_path: Path) -> None:
    store = open_store(store_path)
    first = put_batch(store, "t", 0, bodies("a", 5))
    second = put_batch(store, "t", 0, bodies("b", 3))
    assert (first.first_queue_offset, first.count, second.first_queue_offset) == (0, 5, 5)
    cq = store.queues[("t", 0)]
    assert (cq.min_slot, cq.max_slot, cq.min_offset, cq.max_offset) == (0, 2, 0, 8)
    assert [cq.entry(s).base for s in range(2)] == [0, 5] and cq.entry(1).messages == 3
    assert store.stats.messages_put == 8
    assert read_from(store, "t", 0) == list(enumerate(bodies("a", 5) + bodies("b", 3)))
    store.close()


def test_an_offset_inside_a_batch_is_found_by_binary_search(store_path: Path) -> None:
    store = open_store(store_path)
    for i in range(12):  # batches of 1, 2, 3, ... messages: offsets 0, 1, 3, 6, 10, ...
        put_batch(store, "t", 0, bodies(f"b{i}", i + 1))
    everything = read_from(store, "t", 0)
    assert [o for o, _ in everything] == list(range(78))
    for offset in (0, 1, 2, 5, 6, 44, 77):
        result = store.get("t", 0, offset, max_messages=1, max_bytes=1 << 20)
        messages = decode_messages(result.body, "t")
        assert messages[0].queue_offset <= offset < messages[-1].queue_offset + 1  # the whole batch holding it
        assert (
            result.count == messages[-1].queue_offset + 1 - offset
            and result.next_offset == messages[-1].queue_offset + 1
        )
        assert read_from(store, "t", offset) == everything[offset:]
    assert store.get("t", 0, 78, max_messages=1, max_bytes=1 << 20).status is GetStatus.OFFSET_OVERFLOW_ONE
    store.close()


def test_a_batch_that_does_not_fit_the_rest_of_a_segment_starts_the_next_one_whole(store_path: Path) -> None:
    store = open_store(store_path)
    results = [put_batch(store, "t", 0, bodies(f"s{i}", 7, size=30)) for i in range(8)]  # ~420 B each
    segments = {r.first_offset // SEGMENT for r in results}
    assert len(segments) >= 3
    for r in results:
        assert r.first_offset // SEGMENT == (r.end_offset - 1) // SEGMENT  # never across a boundary
    expected = [b for i in range(8) for b in bodies(f"s{i}", 7, size=30)]
    assert read_from(store, "t", 0) == list(enumerate(expected))
    store.close()
    store, report = reopen(store_path, full_verify=True)
    assert report.damage == [] and read_from(store, "t", 20) == list(enumerate(expected))[20:]
    store.close()


def test_the_tag_filter_skips_whole_batches_by_summary_across_mixed_tag_batches(store_path: Path) -> None:
    store = open_store(store_path)
    put_batch(store, "t", 0, bodies("mixed", 3), ["A", "B", None])  # offsets 0-2
    put_batch(store, "t", 0, bodies("onlyB", 2), "B")  # 3-4
    put_batch(store, "t", 0, bodies("none", 2))  # 5-6
    put_batch(store, "t", 0, bodies("onlyA", 2), "A")  # 7-8
    entries = [store.queues[("t", 0)].entry(s).tags for s in range(4)]
    assert entries[0] & MIXED and entries[1:] == [tag_hash(b"B"), 0, tag_hash(b"A")]

    wanted = frozenset({tag_hash(b"A")})
    result = store.get("t", 0, 0, max_messages=100, max_bytes=1 << 20, tag_hashes=wanted)
    columns = decode(result.body)
    assert columns.queue_offset.tolist() == [0, 1, 2, 7, 8]  # the B-only and untagged batches were skipped
    exact = columns.select(0, None, ["A"])
    assert exact.queue_offset.tolist() == [0, 7, 8] and result.next_offset == 9
    only_b = store.get("t", 0, 3, max_messages=100, max_bytes=1 << 20, tag_hashes=frozenset({tag_hash(b"C")}))
    assert only_b.status is GetStatus.NO_MATCHED_MESSAGE and only_b.next_offset == 9
    store.close()


@pytest.mark.parametrize("kind", [ZSTD, LZ4])
def test_compressed_batches_are_stored_as_sent_and_read_back(store_path: Path, kind: int) -> None:
    store = open_store(store_path)
    sent = bodies("z", 40, size=20)
    record = batch_record("t", sent, "tag", compression=kind)
    assert len(record) < len(batch_record("t", sent, "tag"))
    store.put("t", 0, record, len(sent), tag_summary_of(record))
    assert [
        (m.queue_offset, m.body, m.tags)
        for m in decode_messages(store.get("t", 0, 3, max_messages=5, max_bytes=1 << 20).body, "t")
    ] == [(i, b, "tag") for i, b in enumerate(sent)]
    store.close()
    store, report = reopen(store_path, full_verify=True)
    assert report.damage == [] and read_from(store, "t", 39) == [(39, sent[39])]
    store.close()


def _entries(store: MessageStore) -> list[tuple[int, int, int]]:
    cq = store.queues[("t", 0)]
    return [(e.phys, e.size, e.messages) for e in map(cq.entry, range(cq.min_slot, cq.max_slot))]


@pytest.mark.parametrize(("where", "reason"), [(4, "magic"), (20, "CRC"), (140, "CRC")])
def test_damage_to_a_batch_is_cut_and_the_batches_around_it_survive(store_path: Path, where: int, reason: str) -> None:
    """``where``: a byte of the middle batch's magic, of its broker fields (header CRC), of its
    messages (body CRC)."""
    store = open_store(store_path)
    for i in range(3):
        put_batch(store, "t", 0, bodies(f"b{i}", 4))
    victim_phys, victim_size, _ = _entries(store)[1]
    store.close()
    segment = store_path / "commitlog" / f"{victim_phys - victim_phys % SEGMENT:020d}"
    with open(segment, "r+b") as f:
        f.seek(victim_phys % SEGMENT + where)
        byte = f.read(1)
        f.seek(victim_phys % SEGMENT + where)
        f.write(bytes([byte[0] ^ 0xFF]))

    store, report = reopen(store_path, full_verify=True)
    assert [(d.start, d.end) for d in report.damage] == [(victim_phys, victim_phys + victim_size)]
    assert reason in report.damage[0].reason
    assert report.tombstones == 4  # one tombstone entry stands for the batch's four messages
    expected = [(o, b) for o, b in enumerate(bodies("b0", 4) + bodies("b1", 4) + bodies("b2", 4)) if not 4 <= o < 8]
    assert read_from(store, "t", 0) == expected
    assert put_batch(store, "t", 0, [b"next"]).first_queue_offset == 12  # the lost offsets are not handed out again
    store.close()


def test_a_log_of_the_older_per_message_format_is_refused_whole_not_cut(store_path: Path) -> None:
    store = open_store(store_path)
    put_batch(store, "t", 0, [b"x"])
    store.close()
    segment = store_path / "commitlog" / f"{0:020d}"
    with open(segment, "r+b") as f:  # what format 1 wrote at the start of its log
        f.write((200).to_bytes(4, "big") + (0x52534D31).to_bytes(4, "big"))
    before = segment.read_bytes()
    with pytest.raises(ValueError, match=r"older rocketspark \(one record per message, format 1\)"):
        open_store(store_path)
    assert segment.read_bytes() == before  # nothing cut
