"""Columns to an Arrow record batch, with no per-message Python for the fixed columns.

Bodies and tags become Arrow view arrays over the decoded buffer (16 bytes per value, built
with a few numpy steps) cast to the plain binary/string types Spark expects, one copy made in
C++. Message ids (``codec.ids``) are hex digits gathered with numpy: a batch's client ids are
its first id plus the message's place, so the upper 28 digits are formatted once per batch
(once more each time the 16-bit counter wraps) and the last 4 come from a table. Keys and
properties (rare, variable) are decoded one by one, only for the messages that have them; a
message whose properties hold a ``UNIQ_KEY`` shows that id.
"""

from __future__ import annotations

import functools
from typing import Any

import msgpack
import numpy as np
import numpy.typing as npt
import pyarrow as pa

from rocketspark.codec.columns import Columns
from rocketspark.codec.heads import I64
from rocketspark.codec.source import Source
from rocketspark.protocol.properties import UNIQ_KEY, priority_of

UTC = "UTC"
# What a consumer's columnar read yields (the Spark source's schema, as Arrow, with properties).
SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("queueId", pa.int32()),
        ("queueOffset", pa.int64()),
        ("msgId", pa.string()),
        ("tag", pa.string()),
        ("keys", pa.list_(pa.string())),
        ("body", pa.binary()),
        ("bornTimestamp", pa.timestamp("us", tz=UTC)),
        ("storeTimestamp", pa.timestamp("us", tz=UTC)),
        ("brokerName", pa.string()),
        ("priority", pa.int32()),  # a priority message's (RocketMQ 5.4), else null
        ("properties", pa.map_(pa.string(), pa.string())),
    ]
)
_HEX = np.frombuffer(b"0123456789ABCDEF", dtype=np.uint8)


def _view_array(kind: pa.DataType, data: bytes, begins: I64, lengths: I64, valid: np.ndarray | None) -> pa.Array:
    """A binary or string column whose values are slices of ``data``.

    Arrow's view layout lets each value point anywhere in a buffer (16 bytes per value:
    length, then the value itself if it is 12 bytes or less, else a 4-byte prefix and its
    offset), so it is built with vectorised numpy steps, then cast to the plain type.
    """
    n = len(lengths)
    raw = np.frombuffer(data, dtype=np.uint8)
    views = np.zeros((n, 16), dtype=np.uint8)
    views[:, 0:4] = lengths.astype("<u4").view(np.uint8).reshape(n, 4)
    index = np.minimum(begins[:, None] + np.arange(12), max(len(raw) - 1, 0))
    head = np.where(np.arange(12) < lengths[:, None], raw[index] if len(raw) else 0, 0).astype(np.uint8)
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
        view_kind, n, [validity, pa.py_buffer(views), pa.py_buffer(data)], null_count=null_count
    )
    return array.cast(kind)


def _hex(values: npt.NDArray[np.uint64], digits: int) -> npt.NDArray[np.uint8]:
    """Upper-case hex digits of each value, ``digits`` per value, one row each."""
    shifts = np.arange(digits - 1, -1, -1, dtype=np.uint64) * np.uint64(4)
    rows: npt.NDArray[np.uint8] = _HEX[((values[:, None] >> shifts) & np.uint64(0xF)).astype(np.intp)]
    return rows


_UPPER_MASK = (1 << 112) - 1  # a client id without its low 16 bits


@functools.cache
def _hex4() -> npt.NDArray[np.uint32]:
    """The four hex digits of every 16-bit value, as one uint32 each (256 KiB, made once)."""
    digits: npt.NDArray[np.uint32] = _hex(np.arange(1 << 16, dtype=np.uint64), 4).view(np.uint32)[:, 0]
    return digits


def client_ids(columns: Columns) -> pa.Array:
    """Each message's client id from its batch's first id (32 hex digits); the caller keeps
    only rows of records that have one (``Heads.first_id``). Messages lie in record order and
    by place within each, so a run of messages sharing the upper 28 digits is a block of rows."""
    n, heads = len(columns), columns.heads
    hi, lo = heads.rows["first_hi"].astype(np.uint64), heads.rows["first_lo"].astype(np.uint64)
    low = (lo & np.uint64(0xFFFF)).astype(np.int64)
    runs = 1 + ((low + heads.field("count") - 1) >> 16)  # upper parts per record: the counter may wrap
    run_at = np.zeros(len(runs), dtype=np.int64)
    np.cumsum(runs[:-1], out=run_at[1:])
    upper = b"".join(  # one step per record
        b"".join(b"%028X" % (((h << 48 | w >> 16) + r) & _UPPER_MASK) + b"0000" for r in range(k))
        for h, w, k in zip(hi.tolist(), lo.tolist(), runs.tolist(), strict=True)
    )
    place = low[columns.batch] + columns.index
    run = run_at[columns.batch] + (place >> 16)  # never decreasing
    rows = np.frombuffer(upper, dtype=np.uint32).reshape(-1, 8)
    out = np.repeat(rows, np.bincount(run, minlength=len(rows)), axis=0)
    out[:, 7] = _hex4()[place & 0xFFFF]
    offsets = np.arange(0, 32 * n + 1, 32, dtype=np.int32)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(out)])


def offset_ids(host: bytes, columns: Columns) -> pa.Array:
    """Each message's offset id (``ids.offset_msg_id_at``) on the broker whose store host is
    ``host``: its hex, then 16 digits of the message's physical offset."""
    n = len(columns)
    prefix = np.frombuffer(host.hex().upper().encode(), dtype=np.uint8)
    width = len(prefix) + 16
    out = np.empty((n, width), dtype=np.uint8)
    out[:, : len(prefix)] = prefix
    out[:, len(prefix) :] = _hex(columns.physical_offset.astype(np.uint64), 16)
    offsets = np.arange(0, width * n + 1, width, dtype=np.int32)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(out)])


def msg_ids(columns: Columns, host: bytes, own: list[str | None] | None = None) -> pa.Array:
    """The ``msgId`` column: each message's own ``UNIQ_KEY`` (``own``, where given), else its
    client id from its batch's first id, else (a version-2 record) its offset id."""
    rows = columns.heads.rows
    with_id = ((rows["first_hi"] | rows["first_lo"]) != 0)[columns.batch]
    mixed = not with_id.all() and with_id.any()  # records from before client ids, and after
    owned = own is not None and any(own)
    if mixed or owned:
        import pyarrow.compute as pc  # only here: it costs a process 9 MB (a broker never needs it)
    if with_id.all():
        out = client_ids(columns)
    elif not mixed:
        out = offset_ids(host, columns)
    else:
        out = pc.if_else(pa.array(with_id), client_ids(columns), offset_ids(host, columns))
    if owned:
        out = pc.coalesce(pa.array(own, pa.string()), out)
    return out


def _column(
    kind: pa.DataType, columns: Columns, data: bytes, at: I64, lengths: I64, valid: np.ndarray | None
) -> pa.Array:
    """A binary or string column of values at ``at`` in ``data``. Values that lie end to end
    within each record (the usual case: nothing filtered out in between) are copied once, a
    run per record, and indexed by offsets; otherwise each value is placed by a view."""
    n = len(lengths)
    if n == 0:
        return pa.array([], kind)
    starts = np.flatnonzero(np.r_[True, columns.batch[1:] != columns.batch[:-1]])  # each record's first row
    ends = np.r_[starts[1:], n]
    region_from = at[starts]
    region_to = at[ends - 1] + lengths[ends - 1]
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    shift = np.zeros(len(starts), dtype=np.int64)
    np.cumsum((region_to - region_from)[:-1], out=shift[1:])
    placed = at - np.repeat(region_from - shift, ends - starts)
    if offsets[-1] >= 1 << 31 or not np.array_equal(placed, offsets[:-1]):
        return _view_array(kind, data, at, lengths, valid)
    view = memoryview(data)
    joined = b"".join(view[a:b] for a, b in zip(region_from.tolist(), region_to.tolist(), strict=True))
    validity, nulls = None, 0
    if valid is not None and not valid.all():
        validity, nulls = pa.py_buffer(np.packbits(valid, bitorder="little")), int((~valid).sum())
    buffers = [validity, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(joined)]
    return pa.Array.from_buffers(kind, n, buffers, null_count=nulls)


def _extras(data: bytes, columns: Columns) -> tuple[list[Any], list[Any]]:
    keys: list[Any] = [None] * len(columns)
    props: list[Any] = [None] * len(columns)
    for i in np.flatnonzero(columns.ext_len).tolist():
        start = int(columns.ext_at[i])
        keys[i], props[i] = msgpack.unpackb(data[start : start + int(columns.ext_len[i])])
    return keys, props


def to_record_batch(columns: Columns, source: Source, schema: pa.Schema) -> pa.RecordBatch:
    """The messages as one RecordBatch of ``schema`` (the Spark source's schema as Arrow)."""
    n = len(columns)
    if n == 0:
        return pa.RecordBatch.from_pylist([], schema=schema)
    data = columns.data if isinstance(columns.data, bytes) else bytes(columns.data)
    stamp = pa.timestamp("us", tz=UTC)
    out: dict[str, pa.Array] = {
        "topic": pa.repeat(pa.scalar(source.topic, pa.string()), n),
        "queueId": pa.repeat(pa.scalar(source.queue_id, pa.int32()), n),
        "queueOffset": pa.array(columns.queue_offset + source.offset_delta, pa.int64()),
        "tag": _column(pa.string(), columns, data, columns.tag_at, columns.tag_len, columns.has_tag),
        "body": _column(pa.binary(), columns, data, columns.body_at, columns.body_len, None),
        "bornTimestamp": pa.array(columns.per_message("born_ms") * 1000, stamp),
        "storeTimestamp": pa.array(columns.per_message("store_ms") * 1000, stamp),
        "brokerName": pa.repeat(pa.scalar(source.broker_name, pa.string()), n),
    }
    if columns.ext_len.any():
        keys, props = _extras(data, columns)
        out["msgId"] = msg_ids(columns, source.host, [p.get(UNIQ_KEY) if p else None for p in props])
        out["keys"] = pa.array([k or None for k in keys], pa.list_(pa.string()))
        out["priority"] = pa.array([priority_of(p) for p in props], pa.int32())
        if "properties" in schema.names:
            out["properties"] = pa.array(
                [list(p.items()) if p else None for p in props], schema.field("properties").type
            )
    else:
        out["msgId"] = msg_ids(columns, source.host)
        out["keys"] = pa.nulls(n, pa.list_(pa.string()))
        out["priority"] = pa.nulls(n, pa.int32())
        if "properties" in schema.names:
            out["properties"] = pa.nulls(n, schema.field("properties").type)
    return pa.RecordBatch.from_arrays([out[name].cast(schema.field(name).type) for name in schema.names], schema=schema)
