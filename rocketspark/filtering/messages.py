"""SQL92 filters over decoded batch records: the properties a filter reads, as columns, and
the records of a pull that hold a message it passes.

A message's properties are in its msgpack ext (``[keys, properties]``, see
:mod:`rocketspark.codec.layout`); only the messages that have one are unpacked, and only the
names the filter reads are kept. ``TAGS`` is the message's tag (the tag column) and ``KEYS``
its keys joined by spaces, as RocketMQ's properties hold them; a message without a tag or keys
answers them from its properties of those names, as ``Selector.matches`` does.
"""

from __future__ import annotations

from collections.abc import Set
from typing import Protocol

import msgpack
import numpy as np
import numpy.typing as npt

from rocketspark.codec.columns import Columns, decode
from rocketspark.protocol.properties import KEYS, TAGS


class Mask(Protocol):
    """What ``matching_records`` needs of a compiled filter (a ``Selector``): which messages
    of decoded batches pass. A view, because the selector reads its properties from here."""

    def mask(self, columns: Columns, /) -> npt.NDArray[np.bool_]: ...


def property_columns(columns: Columns, names: Set[str]) -> dict[str, list[str | None]]:
    """For each of ``names``, every message's value (None: it has none)."""
    n = len(columns)
    out: dict[str, list[str | None]] = {name: [None] * n for name in names}
    if not names:
        return out
    data = columns.data
    with_ext = np.flatnonzero(columns.ext_len > 0)
    unpackb = msgpack.unpackb
    plain = [(name, out[name]) for name in names]
    for i, at, length in zip(
        with_ext.tolist(), columns.ext_at[with_ext].tolist(), columns.ext_len[with_ext].tolist(), strict=True
    ):
        keys, properties = unpackb(data[at : at + length])
        for name, column in plain:
            column[i] = properties.get(name)
        if keys and KEYS in out:
            out[KEYS][i] = " ".join(keys)
    if TAGS in out:
        tags = out[TAGS]
        tagged = np.flatnonzero(columns.has_tag)
        for i, at, length in zip(
            tagged.tolist(), columns.tag_at[tagged].tolist(), columns.tag_len[tagged].tolist(), strict=True
        ):
            tags[i] = bytes(data[at : at + length]).decode()
    return out


def matching_records(body: bytes, selector: Mask, first: int, end: int | None) -> tuple[bytes, int]:
    """The records of ``body`` (a read's whole records, as stored) that hold a message at a
    queue offset in ``[first, end)`` the selector passes, joined; and how many such messages.
    A record is kept whole: the reader filters it message by message."""
    columns = decode(body, verify=False)
    reading = columns.select(first, end)
    passed = selector.mask(reading)
    kept = np.unique(reading.batch[passed]).tolist()
    if len(kept) == len(columns.heads):
        return body, int(passed.sum())
    starts, totals = columns.heads.starts, columns.heads.field("total")
    view = memoryview(body)
    joined = b"".join(view[starts[b] : starts[b] + totals[b]] for b in kept)
    return joined, int(passed.sum())
