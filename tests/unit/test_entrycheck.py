"""A read's records checked against the consume-queue entries that found them: the one-by-one
check of small reads (``struct``) answers as the numpy check of large ones, for every fault."""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from broker.store.entrycheck import SMALL_READ, first_mismatch
from rocketspark.codec.build import encode_messages, tag_summary_of
from rocketspark.codec.layout import HEADER_SIZE
from rocketspark.protocol.types import Message
from tests.unit.test_store import open_store


@dataclass
class Read:
    """A read as the store gathers it: the records, and their entries' fields."""

    body: bytearray
    bases: list[int]
    counts: list[int]
    phys: list[int]
    sizes: list[int]

    def start(self, i: int) -> int:
        return sum(self.sizes[:i])


def stored_read(tmp_path: Path, records: int) -> Read:
    """``records`` records of orders/1, stored by a real store and read back."""
    store = open_store(tmp_path / "s", segment_bytes=1 << 20)
    read = Read(bytearray(), [], [], [], [])
    for r in range(records):
        messages = [Message("orders", b"m%d-%d" % (r, i)) for i in range(1 + r % 3)]
        record = encode_messages("orders", messages)
        put = store.put("orders", 1, record, len(messages), tag_summary_of(record))
        data = store.read_record(put.first_offset, len(record))
        assert data is not None
        read.body += data
        read.bases.append(put.first_queue_offset)
        read.counts.append(put.count)
        read.phys.append(put.first_offset)
        read.sizes.append(len(record))
    store.close()
    return read


Fault = Callable[[Read, int], None]  # damages record ``i`` of a read, or its entry


def header(at: int, fmt: str, value: int) -> Fault:
    def fault(read: Read, i: int) -> None:
        struct.pack_into(fmt, read.body, read.start(i) + at, value)

    return fault


def entry(field: str, delta: int) -> Fault:
    def fault(read: Read, i: int) -> None:
        getattr(read, field)[i] += delta

    return fault


def topic(read: Read, i: int) -> None:
    read.body[read.start(i) + HEADER_SIZE] ^= 0x20  # a letter of its topic


def topic_then_header(read: Read, i: int) -> None:
    """A topic fault, and a header fault in the last record: the header is named, not the topic."""
    topic(read, i)
    header(4, ">I", 0xDEADBEEF)(read, len(read.sizes) - 1)


FAULTS: dict[str, Fault | None] = {
    "none": None,
    "magic": header(4, ">I", 0xDEADBEEF),
    "total": header(0, ">I", 99),
    "queue id": header(12, ">I", 7),
    "base offset": header(16, ">Q", 12345),
    "log offset": header(24, ">Q", 1),
    "topic length": header(50, ">H", 3),
    "count": header(52, ">I", 9),
    "entry base": entry("bases", 1),
    "entry count": entry("counts", 1),
    "entry phys": entry("phys", 8),
    "entry size below a header": entry("sizes", -10_000),
    "entry size one over": entry("sizes", 1),
    "topic": topic,
    "topic, then a header": topic_then_header,
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
@pytest.mark.parametrize("records", [1, 3, SMALL_READ])
def test_small_reads_are_judged_as_the_numpy_check_judges_them(tmp_path: Path, fault: str, records: int) -> None:
    read = stored_read(tmp_path, records)
    damage = FAULTS[fault]
    if damage is not None:
        damage(read, min(1, records - 1))
    args = (bytes(read.body), b"orders", 1, read.bases, read.counts, read.phys, read.sizes)
    one_by_one = first_mismatch(*args)
    assert one_by_one == first_mismatch(*args, small=0)
    assert (one_by_one is None) == (damage is None)
