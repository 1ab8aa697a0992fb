"""Records to message objects: the consumer's ``MessageExt`` list.

``to_messages`` reads columns (:mod:`rocketspark.codec.columns`). Everything per message that
numpy can do is done before the loop (queue offsets, positions); what a record's messages share
(its times, log offset, ids) is one object per record, repeated; the loop only slices bodies and
builds one tuple per message, with the garbage collector paused (thousands of fresh objects:
collecting mid-loop only rescans survivors).

``few_messages`` reads a few plain records straight to messages with ``struct``
(:mod:`rocketspark.codec.few`'s checks), where numpy's fixed cost would be most of the work:
one 1 KiB message cost its consumer 56 us through columns.
"""

from __future__ import annotations

from typing import Any

import msgpack
import numpy as np

from rocketspark.codec.columns import Columns, decode
from rocketspark.codec.few import SMALL_MESSAGES, SMALL_RECORDS, Head, Row, check_crcs, check_fields, message_rows
from rocketspark.codec.heads import MAX_SECTION, record_starts
from rocketspark.codec.ids import BatchIds
from rocketspark.codec.layout import (
    COMPRESSION_MASK,
    F_ATTRIBUTES,
    F_BASE_OFFSET,
    F_BODY_CRC,
    F_BORN_MS,
    F_COUNT,
    F_HEADER_CRC,
    F_LOG_OFFSET,
    F_SECTION_SIZE,
    F_STORE_MS,
    F_TOPIC_LEN,
    F_TOTAL,
    F_VERSION,
    HEADER,
    first_id_of,
    head_size,
)
from rocketspark.codec.source import Source
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


def read_messages(
    buf: bytes | memoryview, source: Source, *, verify: bool, first: int, stop: int | None, wanted: list[str] | None
) -> list[MessageExt]:
    """The messages of a pull's records at queue offsets ``[first, stop)`` (``stop`` None: to
    the end) with one of the ``wanted`` tags, labelled from ``source``: ``few_messages`` where it
    reads them, else through columns. RecordCorrupted when a record does not hold together."""
    few = few_messages(buf, source, verify=verify, first=first, stop=stop, wanted=wanted)
    if few is not None:
        return few
    columns = decode(buf, verify=verify).select(first, stop, wanted)
    return labelled(columns, source)


def labelled(columns: Columns, source: Source) -> list[MessageExt]:
    """``to_messages`` of ``columns``, labelled from ``source``."""
    return to_messages(
        columns,
        source.topic,
        source.broker_name,
        source.host,
        queue_id=source.queue_id,
        offset_delta=source.offset_delta,
    )


def few_messages(
    buf: bytes | memoryview, source: Source, *, verify: bool, first: int, stop: int | None, wanted: list[str] | None
) -> list[MessageExt] | None:
    """``read_messages`` for a buffer of a few uncompressed records (``few.SMALL_RECORDS``,
    ``few.SMALL_MESSAGES``), read with ``struct``: the same checks, errors and messages as
    through columns. (One difference, on damage only a CRC would have refused: a 64-bit time or
    offset of 2^63 or more is read unsigned here, where numpy's columns read it negative.) None
    when ``buf`` is not that: decode it as columns."""
    data = buf if isinstance(buf, bytes) else bytes(buf)  # bodies and tags are sliced from it as bytes
    starts = record_starts(data)
    heads = [HEADER.unpack_from(data, pos) for pos in starts] if len(starts) <= SMALL_RECORDS else []
    counts = [head[F_COUNT] for head in heads]
    if not heads or not 0 < sum(counts) <= SMALL_MESSAGES or any(h[F_ATTRIBUTES] & COMPRESSION_MASK for h in heads):
        return None  # a damaged count or compression flag too: the columns name the fault
    if verify:
        fields = ([h[F_TOTAL] for h in heads], [h[F_HEADER_CRC] for h in heads], [h[F_BODY_CRC] for h in heads])
        check_crcs(data, starts, *fields)
    topic_ats = [head_size(head[F_VERSION]) for head in heads]
    check_fields(heads, topic_ats, starts, MAX_SECTION)
    secs = [pos + at + head[F_TOPIC_LEN] for pos, at, head in zip(starts, topic_ats, heads, strict=True)]
    rows = message_rows(data, starts, secs, counts, [head[F_SECTION_SIZE] for head in heads])
    return _build(data, heads, _kept(data, heads, rows, first, stop, wanted), source)


def _kept(
    data: bytes, heads: list[Head], rows: list[Row], first: int, stop: int | None, wanted: list[str] | None
) -> list[Row]:
    """The rows ``Columns.select`` keeps: queue offsets in ``[first, stop)``, a wanted tag
    (``Columns.tag_in``: byte for byte, an empty tag wanted by ``""``)."""
    tags = {tag.encode() for tag in wanted} if wanted else None
    kept: list[Row] = []
    for row in rows:
        record, index, _, _, tag_at, tag_len, has_tag, _, _ = row
        offset = heads[record][F_BASE_OFFSET] + index
        if offset < first or (stop is not None and offset >= stop):
            continue
        if tags is None or (has_tag and data[tag_at : tag_at + tag_len] in tags):
            kept.append(row)
    return kept


def _build(data: bytes, heads: list[Head], rows: list[Row], source: Source) -> list[MessageExt]:
    """``to_messages``'s objects for these rows, decoded in its order (every tag, then every
    message's keys and properties: a damaged one fails as it would there)."""
    tags = [data[at : at + length].decode() if has else None for _, _, _, _, at, length, has, _, _ in rows]
    exts: list[tuple[Any, Any]] = []
    for _, _, _, _, _, _, _, ext_at, ext_len in rows:
        keys, properties = msgpack.unpackb(data[ext_at : ext_at + ext_len]) if ext_len else (None, None)
        exts.append((keys, properties))
    batch_ids = [BatchIds(first_id_of(head), source.host) for head in heads]
    topic, queue_id, delta, broker_name = source.topic, source.queue_id, source.offset_delta, source.broker_name
    new, cls = _tuple_new, MessageExt
    messages: list[MessageExt] = []
    for (record, index, body_at, body_len, *_), tag, (keys, properties) in zip(rows, tags, exts, strict=True):
        head = heads[record]
        fields = (topic, queue_id, head[F_BASE_OFFSET] + index + delta, data[body_at : body_at + body_len], tag, keys,
                  properties, head[F_BORN_MS], head[F_STORE_MS], head[F_LOG_OFFSET], broker_name, index,
                  batch_ids[record])  # fmt: skip  # MessageExt's order, as to_messages builds it
        messages.append(new(cls, fields))
    return messages
