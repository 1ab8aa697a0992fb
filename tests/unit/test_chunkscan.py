"""Parsing copied log as columns: records by queue in log order, gaps stepped over, the
segment's padding recognised only when whole, damage refused where it is."""

from __future__ import annotations

import struct
import zlib

import pytest

from broker.store.chunkscan import scan_chunk
from rocketspark.codec.build import stamped_head
from rocketspark.codec.layout import BODY_AT, GAP_MAGIC, RecordCorrupted, encode_blank
from tests.helpers import batch_record


def _log(specs: list[tuple[str, int, int, str | None]], base: int = 0) -> tuple[bytes, list[int]]:
    """Records (topic, queue id, queue offset, tag) laid end to end from ``base``."""
    out, starts = bytearray(), []
    for topic, queue_id, queue_offset, tag in specs:
        starts.append(base + len(out))
        sent = batch_record(topic, [b"body"], tag)
        out += stamped_head(sent, queue_id, queue_offset, base + len(out), 2) + sent[BODY_AT:]
    return bytes(out), starts


def test_records_come_out_by_queue_in_log_order_with_their_tag_hashes() -> None:
    specs = [("abc", 0, 0, None), ("xyz", 0, 0, "t1"), ("abc", 1, 0, None), ("abc", 0, 1, "t2"), ("xyz", 0, 1, None)]
    buf, starts = _log(specs, base=4096)
    scan = scan_chunk(buf, 4096, 1 << 20)
    assert scan.records == 5 and scan.used == len(buf) and not scan.sealed
    runs = {(r.topic, r.queue_id): r for r in scan.runs}
    assert set(runs) == {("abc", 0), ("abc", 1), ("xyz", 0)}  # two topics of one length told apart
    assert runs["abc", 0].phys.tolist() == [starts[0], starts[3]]
    assert runs["abc", 0].tags.tolist() == [0, zlib.crc32(b"t2")]
    assert runs["xyz", 0].queue_offsets.tolist() == [0, 1] and runs["xyz", 0].contiguous


def test_a_gap_is_stepped_over_and_a_record_cut_off_is_left_for_later() -> None:
    first, _ = _log([("abc", 0, 0, None)])
    gap = struct.pack(">II", 24, GAP_MAGIC) + bytes(16)
    second, _ = _log([("abc", 0, 1, None)], base=len(first) + len(gap))
    buf = first + gap + second
    scan = scan_chunk(buf[:-5], 0, 1 << 20)
    assert scan.records == 1 and scan.used == len(first) + len(gap)


def test_the_padding_that_ends_a_segment_counts_only_when_all_of_it_is_there() -> None:
    buf, _ = _log([("abc", 0, 0, None)])
    capacity = len(buf) + 64
    padded = buf + encode_blank(64)
    assert scan_chunk(padded[:-10], 0, capacity).sealed is False
    assert scan_chunk(padded, 0, capacity).sealed is True


def test_damage_is_refused_where_it_is() -> None:
    buf, starts = _log([("abc", 0, 0, None), ("abc", 0, 1, None)])
    damaged = bytearray(buf)
    damaged[starts[1] + 30] ^= 1
    with pytest.raises(RecordCorrupted) as caught:
        scan_chunk(bytes(damaged), 0, 1 << 20)
    assert caught.value.position == starts[1]
    with pytest.raises(RecordCorrupted, match="not where it lies"):
        scan_chunk(buf, 100, 1 << 20)  # records claiming other log offsets
