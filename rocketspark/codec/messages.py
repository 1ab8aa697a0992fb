"""Columns to message objects: the consumer's ``MessageExt`` list.

Everything per message that numpy can do is done before the loop (queue offsets, positions);
what a record's messages share (its times, log offset, ids) is one object per record, repeated;
the loop only slices bodies and builds one tuple per message, with the garbage collector paused
(thousands of fresh objects: collecting mid-loop only rescans survivors).
"""

from __future__ import annotations

from typing import Any

import msgpack
import numpy as np

from rocketspark.codec.columns import Columns
from rocketspark.codec.ids import BatchIds
from rocketspark.protocol.types import GC_PAUSE, MessageExt

_tuple_new = tuple.__new__


def to_messages(
    columns: Columns,
    topic: str,
    broker_name: str,
    host: bytes,
    *,
    queue_id: int | None = None,
    offset_delta: int = 0,
) -> list[MessageExt]:
    """One MessageExt per message, read from the broker whose ``ids.store_host`` is ``host``
    (its offset ids name it); ``queue_id`` and ``offset_delta`` relabel them into the queue the
    caller asked for (a static topic's logical queue)."""
    n = len(columns)
    if n == 0:
        return []
    data = columns.data if isinstance(columns.data, bytes) else bytes(columns.data)
    heads = columns.heads
    counts = np.bincount(columns.batch, minlength=len(heads)).tolist()  # messages lie in record order
    qids = [queue_id] * n if queue_id is not None else _repeat(heads.field("queue_id").tolist(), counts)
    offsets = (columns.queue_offset + offset_delta).tolist()
    born = _repeat(heads.field("born_ms").tolist(), counts)
    store = _repeat(heads.field("store_ms").tolist(), counts)
    phys = _repeat(heads.field("commitlog_offset").tolist(), counts)
    index = columns.index.tolist()
    batch_ids = _repeat([BatchIds(heads.first_id(r), host) for r in range(len(heads))], counts)
    body_at = columns.body_at.tolist()
    body_end = (columns.body_at + columns.body_len).tolist()
    tags: list[str | None] = [None] * n
    if columns.has_tag.any():
        for i, a, length in zip(
            columns.has_tag.nonzero()[0].tolist(),
            columns.tag_at[columns.has_tag].tolist(),
            columns.tag_len[columns.has_tag].tolist(),
            strict=True,
        ):
            tags[i] = data[a : a + length].decode()
    keys: list[object] = [None] * n
    props: list[object] = [None] * n
    with_ext = columns.ext_len > 0
    if with_ext.any():
        unpackb = msgpack.unpackb
        for i, a, length in zip(
            with_ext.nonzero()[0].tolist(),
            columns.ext_at[with_ext].tolist(),
            columns.ext_len[with_ext].tolist(),
            strict=True,
        ):
            keys[i], props[i] = unpackb(data[a : a + length])
    new, cls = _tuple_new, MessageExt
    with GC_PAUSE:
        return [
            new(cls, (topic, q, o, data[a:b], t, k, p, bo, s, ph, broker_name, ix, ids))
            for q, o, a, b, t, k, p, bo, s, ph, ix, ids in zip(
                qids, offsets, body_at, body_end, tags, keys, props, born, store, phys, index, batch_ids, strict=True
            )
        ]


def _repeat(values: list[Any], counts: list[int]) -> list[Any]:
    """Each record's value once for each of its messages: one object, many references."""
    out: list[Any] = []
    for value, k in zip(values, counts, strict=True):
        out += [value] * k
    return out
