"""Stored records to Arrow columns, many records at a time.

The Spark source yields ``pyarrow.RecordBatch`` objects (about twice as fast as rows through
the Python Data Source API). Building them record by record in Python would cost more than
Spark itself, so this module touches each record in Python only to find where it starts and
check its CRC; every field is then gathered for all records at once with numpy, using the
fixed layouts of :mod:`rocketspark.protocol.record`. Keys and properties (rare, variable)
are decoded one by one, only for the records that have them.
"""

from __future__ import annotations

import functools
import struct
import zlib
from dataclasses import dataclass
from typing import Any

import msgpack
import numpy as np
import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema

from rocketspark.protocol import record
from rocketspark.protocol.record import RecordCorrupted
from rocketspark.spark.schema import source_schema

UTC = "UTC"
_HEX = np.frombuffer(b"0123456789ABCDEF", dtype=np.uint8)


@functools.lru_cache(maxsize=2)
def arrow_schema(include_properties: bool) -> pa.Schema:
    """The source schema as Spark converts it to Arrow (UTC timestamps): what the batches a
    reader yields must match exactly."""
    return to_arrow_schema(source_schema(include_properties), timezone=UTC)


@dataclass(frozen=True, slots=True)
class Source:
    """What every record of one pull shares: where it was read and how to relabel it."""

    topic: str
    queue_id: int  # logical queue id
    offset_delta: int  # logical minus physical offset of the segment
    broker_name: str


def record_starts(buf: bytes, verify: bool) -> list[int]:
    """Where each record starts; checks magic, size and (optionally) CRC on the way.

    The one loop that touches every record in Python, so it checks inline what
    ``record.check_record`` checks, with the same layout constants."""
    starts: list[int] = []
    append = starts.append
    unpack = record.PREFIX.unpack_from
    crc_from = record.PREFIX.size  # the CRC covers the record after its prefix
    crc32 = zlib.crc32
    magic_ok, min_size = record.RECORD_MAGIC, record.HEADER_SIZE
    view = memoryview(buf)
    pos, end = 0, len(buf)
    try:
        while pos < end:
            total, magic, crc = unpack(buf, pos)
            stop = pos + total
            if magic != magic_ok or total < min_size or stop > end:
                raise RecordCorrupted(f"bad record header at byte {pos} of a pull response", pos)
            if verify and crc32(view[pos + crc_from : stop]) != crc:
                raise RecordCorrupted(f"CRC mismatch in the record at byte {pos} of a pull response", pos)
            append(pos)
            pos = stop
    except struct.error:
        raise RecordCorrupted(f"truncated record at byte {pos} of a pull response", pos) from None
    finally:
        view.release()
    return starts


def _gather(data: np.ndarray, starts: np.ndarray, dtype: np.dtype[Any]) -> np.ndarray:
    """The fixed-layout struct at every ``starts`` position, as a structured array."""
    raw = data[starts[:, None] + np.arange(dtype.itemsize)]
    return np.ascontiguousarray(raw).view(dtype).ravel()


def _view_array(
    kind: pa.DataType, buf: bytes, data: np.ndarray, begins: np.ndarray, lengths: np.ndarray, valid: np.ndarray | None
) -> pa.Array:
    """A binary or string column whose values are slices of ``buf``, copied once, in C.

    Arrow's view layout lets each value point anywhere in a buffer (16 bytes per value:
    length, then the value itself if it is 12 bytes or less, else a 4-byte prefix and its
    offset), so it can be built with a few vectorised numpy steps and cast to the plain
    binary/string type Spark expects.
    """
    n = len(lengths)
    views = np.zeros((n, 16), dtype=np.uint8)
    views[:, 0:4] = lengths.astype("<u4").view(np.uint8).reshape(n, 4)
    index = np.minimum(begins[:, None] + np.arange(12), max(len(data) - 1, 0))
    head = np.where(np.arange(12) < lengths[:, None], data[index] if len(data) else 0, 0).astype(np.uint8)
    inline = lengths <= 12
    views[inline, 4:16] = head[inline]
    outline = ~inline
    views[outline, 4:8] = head[outline, 0:4]
    views[outline, 12:16] = begins[outline].astype("<u4").view(np.uint8).reshape(-1, 4)
    view_kind = pa.binary_view() if kind == pa.binary() else pa.string_view()
    validity = None
    null_count = 0
    if valid is not None and not valid.all():
        validity = pa.py_buffer(np.packbits(valid, bitorder="little"))
        null_count = int((~valid).sum())
    array = pa.Array.from_buffers(
        view_kind, n, [validity, pa.py_buffer(views), pa.py_buffer(buf)], null_count=null_count
    )
    return array.cast(kind)


def _msg_ids(broker_name: str, phys: np.ndarray) -> pa.Array:
    """``record.msg_id`` for every record: 8 hex digits of the broker, 16 of the log offset."""
    prefix = np.frombuffer(f"{zlib.crc32(broker_name.encode()):08X}".encode(), dtype=np.uint8)
    nibbles = (phys.astype(np.uint64)[:, None] >> (np.arange(15, -1, -1, dtype=np.uint64) * 4)) & 0xF
    digits = np.concatenate([np.broadcast_to(prefix, (len(phys), 8)), _HEX[nibbles.astype(np.intp)]], axis=1)
    offsets = np.arange(0, 24 * len(phys) + 1, 24, dtype=np.int32)
    return pa.Array.from_buffers(pa.string(), len(phys), [None, pa.py_buffer(offsets), pa.py_buffer(digits.ravel())])


def _extras(buf: bytes, ext_at: np.ndarray, ext_len: np.ndarray) -> tuple[list[Any], list[Any]]:
    keys: list[Any] = [None] * len(ext_len)
    props: list[Any] = [None] * len(ext_len)
    for i in np.flatnonzero(ext_len):
        start = int(ext_at[i])
        keys[i], props[i] = msgpack.unpackb(buf[start : start + int(ext_len[i])])
    return keys, props


def to_record_batch(buf: bytes, source: Source, schema: pa.Schema, *, verify: bool = True) -> pa.RecordBatch:
    """All records of one pull response as one RecordBatch of ``schema`` (see arrow_schema)."""
    starts_list = record_starts(buf, verify)
    n = len(starts_list)
    if n == 0:
        return pa.RecordBatch.from_pylist([], schema=schema)
    data = np.frombuffer(buf, dtype=np.uint8)
    starts = np.asarray(starts_list, dtype=np.int64)
    head = _gather(data, starts, record.HEADER_DTYPE)
    payload = starts + record.HEADER_SIZE + head["topic_len"].astype(np.int64)
    lens = _gather(data, payload, record.PAYLOAD_HEAD_DTYPE)
    body_len = lens["body_len"].astype(np.int64)
    tag_len = lens["tag_len"].astype(np.int64)
    ext_len = lens["ext_len"].astype(np.int64)
    has_tag = tag_len != record.NO_TAG
    tag_bytes = np.where(has_tag, tag_len, 0)
    body_at = payload + record.PAYLOAD_HEAD_SIZE
    tag_at = body_at + body_len
    ext_at = tag_at + tag_bytes
    ends = starts + head["total"].astype(np.int64)
    if not np.array_equal(ext_at + ext_len, ends):
        bad = int(np.flatnonzero(ext_at + ext_len != ends)[0])
        raise RecordCorrupted(f"payload lengths of the record at byte {starts_list[bad]} are wrong", starts_list[bad])
    qoff = head["queue_offset"].astype(np.int64)
    columns: dict[str, pa.Array] = {
        "topic": pa.repeat(pa.scalar(source.topic, pa.string()), n),
        "queueId": pa.repeat(pa.scalar(source.queue_id, pa.int32()), n),
        "queueOffset": pa.array(qoff + source.offset_delta, pa.int64()),
        "msgId": _msg_ids(source.broker_name, head["commitlog_offset"].astype(np.int64)),
        "tag": _view_array(pa.string(), buf, data, tag_at, tag_bytes, has_tag),
        "body": _view_array(pa.binary(), buf, data, body_at, body_len, None),
        "bornTimestamp": pa.array(head["born_ms"].astype(np.int64) * 1000, pa.timestamp("us", tz=UTC)),
        "storeTimestamp": pa.array(head["store_ms"].astype(np.int64) * 1000, pa.timestamp("us", tz=UTC)),
        "brokerName": pa.repeat(pa.scalar(source.broker_name, pa.string()), n),
    }
    if ext_len.any():
        keys, props = _extras(buf, ext_at, ext_len)
        columns["keys"] = pa.array([k or None for k in keys], pa.list_(pa.string()))
        if "properties" in schema.names:
            kind = schema.field("properties").type
            columns["properties"] = pa.array([list(p.items()) if p else None for p in props], kind)
    else:
        columns["keys"] = pa.nulls(n, pa.list_(pa.string()))
        if "properties" in schema.names:
            columns["properties"] = pa.nulls(n, schema.field("properties").type)
    return pa.RecordBatch.from_arrays(
        [columns[name].cast(schema.field(name).type) for name in schema.names], schema=schema
    )
