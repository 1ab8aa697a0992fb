"""Arrow columns to batch records: the Spark sink's encoder, with nothing done per row in Python.

A binary or string Arrow array is already laid out as the batch section wants a column
(offsets, then data), so a run of rows becomes a section by rebasing a slice of its offsets
and joining its data buffers. Runs are cut by size (at most ``max_bytes`` each), the same way
for the same rows, so a re-run of a Spark task numbers its messages alike.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from rocketspark.codec.build import Idempotence, Section, encode_batch, join_section, record_overhead
from rocketspark.codec.layout import NONE, summary_of, tag_hash

I64 = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class MessageArrays:
    """One queue's messages as Arrow arrays of equal length (no nulls in ``body``/``ext``)."""

    body: pa.Array  # binary
    tag: pa.Array  # string, null where a message has no tag
    ext: pa.Array  # binary: packed keys and properties, empty where none

    def __len__(self) -> int:
        return len(self.body)


def _column(array: pa.Array) -> tuple[I64, memoryview]:
    """A binary/string array's offsets (``len + 1``, from its own start) and its data."""
    array = array.cast(pa.binary()) if not pa.types.is_binary(array.type) else array
    buffers = array.buffers()
    offsets = np.frombuffer(buffers[1], dtype=np.int32)[array.offset : array.offset + len(array) + 1].astype(np.int64)
    data = memoryview(buffers[2]) if buffers[2] is not None else memoryview(b"")
    return offsets, data


def records(
    topic: str,
    messages: MessageArrays,
    max_bytes: int,
    *,
    compression_kind: int = NONE,
    producer: tuple[int, int] | None = None,
) -> Iterator[tuple[bytes, int]]:
    """Batch records of the messages, in order, each at most about ``max_bytes``; with
    ``producer`` (id, epoch) each is numbered from the last one's end (sequence 0 first)."""
    n = len(messages)
    if n == 0:
        return
    tags = messages.tag
    has_tag = tags.is_valid().to_numpy(zero_copy_only=False)
    body_off, body_data = _column(messages.body)
    tag_off, tag_data = _column(tags.fill_null(""))
    ext_off, ext_data = _column(messages.ext)
    sizes = np.diff(body_off) + np.diff(tag_off) + np.diff(ext_off) + 13
    ends = np.cumsum(sizes)
    start = 0
    topic_bytes = topic.encode()
    max_bytes = max(1, max_bytes - record_overhead(topic_bytes))
    while start < n:
        floor = int(ends[start - 1]) if start else 0
        stop = max(start + 1, int(np.searchsorted(ends, floor + max_bytes, side="right")))
        section = join_section(
            np.diff(body_off[start : stop + 1]),
            body_data[int(body_off[start]) : int(body_off[stop])],
            np.diff(tag_off[start : stop + 1]),
            tag_data[int(tag_off[start]) : int(tag_off[stop])],
            np.diff(ext_off[start : stop + 1]),
            ext_data[int(ext_off[start]) : int(ext_off[stop])],
            has_tag[start:stop].astype(np.uint8),
        )
        distinct = pc.unique(tags.slice(start, stop - start).drop_null()).to_pylist()
        summary = summary_of({tag_hash(t.encode()) for t in distinct if t})
        idem = None if producer is None else Idempotence(producer[0], producer[1], start)
        record = encode_batch(
            topic_bytes, Section(section, stop - start, summary), compression_kind=compression_kind, idempotence=idem
        )
        yield record, stop - start
        start = stop
