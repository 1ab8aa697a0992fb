"""Decoding batch records into columns: every message of many batches at once.

``decode`` walks a buffer of concatenated records (a pull response; a send's one record),
checks each record's header and both CRCs (:mod:`rocketspark.codec.heads`), and then finds
every message's body, tag and keys/properties with numpy over all messages together: the
only Python loop is one step per batch. The result, :class:`Columns`, is what the Message
decoder, the Arrow builder and the broker's ingest check all read
(:mod:`rocketspark.codec.messages`, :mod:`rocketspark.codec.arrow`); a consumer's pull of a few
small records skips it (``messages.few_messages``).
"""

from __future__ import annotations

from dataclasses import dataclass

import msgpack
import numpy as np
import numpy.typing as npt

from rocketspark.codec import compression, ids
from rocketspark.codec.few import SMALL_MESSAGES, SMALL_RECORDS, message_rows
from rocketspark.codec.heads import I64, MAX_SECTION, Heads, read_heads
from rocketspark.codec.layout import COMPRESSION_MASK, HAS_TAG, NONE, RecordCorrupted, summary_of, tag_hash
from rocketspark.protocol.properties import UNIQ_KEY

_U32 = np.dtype("<u4")


@dataclass(frozen=True, slots=True)
class Columns:
    """Every message of a buffer of records, as columns; positions index ``data``."""

    data: bytes | memoryview  # the sections: the buffer itself, or the decompressed sections joined
    heads: Heads
    batch: I64  # which record each message is in
    index: I64  # its place in that record
    body_at: I64
    body_len: I64
    tag_at: I64
    tag_len: I64
    has_tag: npt.NDArray[np.bool_]
    ext_at: I64
    ext_len: I64

    def __len__(self) -> int:
        return len(self.batch)

    @property
    def queue_offset(self) -> I64:
        return self.heads.field("base_offset")[self.batch] + self.index

    @property
    def physical_offset(self) -> I64:
        """Each message's physical offset, the position its offset id names (``ids.physical_offset``)."""
        return self.heads.field("commitlog_offset")[self.batch] + self.index

    # -- ids (rocketspark.codec.ids): one message at a time, for code that encodes one at a time

    def ext(self, i: int) -> tuple[list[str] | None, dict[str, str] | None]:
        """Message ``i``'s keys and properties (None for none)."""
        length = int(self.ext_len[i])
        if not length:
            return None, None
        at = int(self.ext_at[i])
        keys, properties = msgpack.unpackb(self.data[at : at + length])
        return keys or None, properties or None

    def derived_id(self, i: int) -> str | None:
        """Message ``i``'s client id from its batch's first id (None: a version-2 record), not
        looking at its properties."""
        first = self.heads.first_id(int(self.batch[i]))
        return None if first is None else ids.client_id_at(first, int(self.index[i]))

    def client_id(self, i: int, properties: dict[str, str] | None = None) -> str | None:
        """Message ``i``'s client id (RocketMQ's ``UNIQ_KEY``): its own ``UNIQ_KEY`` property
        if it has one, else the one its batch's first id gives it, else None (a version-2
        record). Pass ``properties`` when they are decoded already."""
        if properties is None and self.ext_len[i]:
            properties = self.ext(i)[1]
        own = properties.get(UNIQ_KEY) if properties else None
        return own or self.derived_id(i)

    def offset_msg_id(self, i: int, host: bytes) -> str:
        """Message ``i``'s offset id, read from the broker whose ``ids.store_host`` is ``host``."""
        return ids.offset_msg_id_at(host, int(self.heads.rows["commitlog_offset"][self.batch[i]]) + int(self.index[i]))

    def msg_id(self, i: int, host: bytes, properties: dict[str, str] | None = None) -> str:
        """Message ``i``'s id as RocketMQ's ``getMsgId`` gives it: the client id, else the offset id."""
        return self.client_id(i, properties) or self.offset_msg_id(i, host)

    def per_message(self, name: str) -> I64:
        """A header field repeated for each message of its record."""
        return self.heads.field(name)[self.batch]

    def take(self, keep: npt.NDArray[np.bool_]) -> Columns:
        """Only the messages where ``keep`` is true."""
        return Columns(
            self.data,
            self.heads,
            self.batch[keep],
            self.index[keep],
            self.body_at[keep],
            self.body_len[keep],
            self.tag_at[keep],
            self.tag_len[keep],
            self.has_tag[keep],
            self.ext_at[keep],
            self.ext_len[keep],
        )

    def select(self, first: int, end: int | None = None, wanted: list[str] | None = None) -> Columns:
        """The messages at queue offsets ``[first, end)`` that carry one of the ``wanted``
        tags: a pull answers with whole batches, and the broker's tag filter is by summary."""
        offsets = self.queue_offset
        keep = offsets >= first
        if end is not None:
            keep &= offsets < end
        if wanted:
            keep &= self.tag_in(wanted)
        return self if keep.all() else self.take(keep)

    def tag_summary(self) -> int:
        """The tag summary these messages give (``layout.summary_of`` of their distinct tags),
        the distinct tags found with numpy over a padded matrix of the tags' bytes."""
        tagged = self.has_tag & (self.tag_len > 0)
        if not tagged.any():
            return 0
        raw = np.frombuffer(self.data, dtype=np.uint8)
        at, lengths = self.tag_at[tagged], self.tag_len[tagged]
        width = int(lengths.max())
        cells = raw[np.minimum(at[:, None] + np.arange(width), len(raw) - 1)]
        cells[np.arange(width) >= lengths[:, None]] = 0
        keyed = np.column_stack([cells, (lengths & 0xFF).astype(np.uint8), (lengths >> 8).astype(np.uint8)])
        rows = np.unique(keyed, axis=0)
        distinct = {bytes(row[: int(row[-2]) + (int(row[-1]) << 8)]) for row in rows}
        return summary_of({tag_hash(t) for t in distinct})

    def tag_in(self, wanted: list[str]) -> npt.NDArray[np.bool_]:
        """Which messages carry one of the ``wanted`` tags (compared byte for byte)."""
        hit = np.zeros(len(self), dtype=np.bool_)
        raw = np.frombuffer(self.data, dtype=np.uint8)
        for tag in {t.encode() for t in wanted}:
            same_len = np.flatnonzero(self.has_tag & (self.tag_len == len(tag)))
            if len(same_len) and tag:
                got = raw[self.tag_at[same_len, None] + np.arange(len(tag))]
                same_len = same_len[(got == np.frombuffer(tag, dtype=np.uint8)).all(axis=1)]
            hit[same_len] = True
        return hit


def _sections(buf: bytes | memoryview, heads: Heads) -> tuple[bytes | memoryview, I64]:
    """The buffer holding every record's message section, and where each starts in it:
    ``buf`` itself unless a record is compressed."""
    topic_len = heads.field("topic_len")
    at = heads.starts + heads.topic_at + topic_len
    kinds = heads.field("attributes") & COMPRESSION_MASK
    size = heads.field("section_size")
    if not np.count_nonzero(kinds):
        return buf, at
    ends = heads.starts + heads.field("total")
    parts: list[bytes | memoryview] = []
    view = memoryview(buf)
    for i, (kind, start, end, n) in enumerate(
        zip(kinds.tolist(), at.tolist(), ends.tolist(), size.tolist(), strict=True)
    ):
        if kind == NONE:
            parts.append(view[start : start + n])
            continue
        try:
            parts.append(compression.decompress(kind, view[start:end], n))
        except compression.DecompressionFailed as exc:
            raise heads.corrupted(i, f"a message section that is damaged: {exc}") from None
    starts = np.zeros(len(size), dtype=np.int64)
    np.cumsum(size[:-1], out=starts[1:])
    return b"".join(parts), starts


def _offsets(data: bytes | memoryview, sec: I64, count: I64) -> tuple[I64, I64]:
    """Each message's start and end in its record's three offsets arrays (bodies, tags,
    keys/properties), shape (3, messages). A record's three arrays lie end to end, so each
    record is one numpy view of ``3 * (count + 1)`` values: one step per record."""
    starts, ends = [], []
    for at, n in zip(sec.tolist(), count.tolist(), strict=True):
        values = np.frombuffer(data, dtype=_U32, count=3 * (n + 1), offset=at).reshape(3, n + 1)
        starts.append(values[:, :-1])
        ends.append(values[:, 1:])
    if not starts:
        return np.zeros((3, 0), dtype=np.int64), np.zeros((3, 0), dtype=np.int64)
    return np.concatenate(starts, axis=1).astype(np.int64), np.concatenate(ends, axis=1).astype(np.int64)


def decode(
    buf: bytes | memoryview, *, verify: bool = True, max_section: int = MAX_SECTION, small: int = SMALL_MESSAGES
) -> Columns:
    """Every message of the records in ``buf`` as columns; RecordCorrupted when a record's
    header, CRC or message section does not hold together. (Checks ask ``np.count_nonzero``
    rather than ``.any()``: a quarter of the cost on the small arrays of a send.) A few
    records of at most ``small`` messages in all (0: never) are read message by message with
    ``struct`` (``_messages_few``), the same checks in the same order: numpy's fixed cost was
    most of what a pull of one message cost its reader."""
    heads = read_heads(buf, verify=verify, max_section=max_section, small=SMALL_RECORDS if small else 0)
    data, sec = _sections(buf, heads)
    count = heads.field("count")
    size = heads.field("section_size")
    n = int(count.sum())
    if 0 < n <= min(small, SMALL_MESSAGES) and len(heads) <= SMALL_RECORDS:
        return Columns(data, heads, *_messages_few(data, heads, sec.tolist(), count.tolist(), size.tolist()))
    batch = np.repeat(np.arange(len(heads), dtype=np.int64), count)
    first = np.zeros(len(heads), dtype=np.int64)
    np.cumsum(count[:-1], out=first[1:])
    index = np.arange(n, dtype=np.int64) - first[batch]
    raw = np.frombuffer(data, dtype=np.uint8)
    width = 4 * (count + 1)  # one offsets array
    flags_at = sec + 3 * width
    data_at = flags_at + count  # where the bodies start
    lo, hi = _offsets(data, sec, count)
    firsts, totals = lo[:, first], hi[:, first + count - 1]  # each record's first and last offset
    if np.count_nonzero(firsts != 0) or np.count_nonzero(data_at + totals.sum(axis=0) != sec + size):
        bad = int(np.argmax((firsts != 0).any(axis=0) | (data_at + totals.sum(axis=0) != sec + size)))
        raise heads.corrupted(bad, "a message section whose offsets do not add up to its size")
    lengths = hi - lo
    if np.count_nonzero(lengths < 0):
        raise heads.corrupted(int(batch[np.argmax((lengths < 0).any(axis=0))]), "message offsets that go backwards")
    flags = raw[flags_at[batch] + index]
    has_tag = (flags & HAS_TAG).astype(np.bool_)
    if np.count_nonzero(flags > HAS_TAG) or np.count_nonzero((~has_tag) & (lengths[1] > 0)):
        bad = int(batch[np.argmax((flags > HAS_TAG) | ((~has_tag) & (lengths[1] > 0)))])
        raise heads.corrupted(bad, "message flags that disagree with its tags")
    da = data_at[batch]
    body_total, tag_total = totals[0][batch], totals[1][batch]
    return Columns(
        data,
        heads,
        batch,
        index,
        da + lo[0],
        lengths[0],
        da + body_total + lo[1],
        lengths[1],
        has_tag,
        da + body_total + tag_total + lo[2],
        lengths[2],
    )


def _messages_few(
    data: bytes | memoryview, heads: Heads, secs: list[int], counts: list[int], sizes: list[int]
) -> tuple[I64, I64, I64, I64, I64, I64, npt.NDArray[np.bool_], I64, I64]:
    """``decode``'s pass over the messages for a few of them (``few.message_rows``), as columns."""
    rows = message_rows(data, heads.starts.tolist(), secs, counts, sizes)
    columns = np.array(rows, dtype=np.int64).T.copy()  # one contiguous row a column, as numpy's pass gives
    batch, index, body_at, body_len, tag_at, tag_len, has_tag, ext_at, ext_len = columns
    return batch, index, body_at, body_len, tag_at, tag_len, has_tag.astype(np.bool_), ext_at, ext_len


def check_tags_utf8(columns: Columns) -> None:
    """Every tag is valid UTF-8 (the ingest check; readers trust what the broker checked).

    The tags' bytes are gathered into one buffer and decoded at once; that each tag is valid
    on its own then follows from no tag starting in the middle of a character."""
    tagged = columns.has_tag & (columns.tag_len > 0)
    if not tagged.any():
        return
    raw = np.frombuffer(columns.data, dtype=np.uint8)
    starts, lengths = columns.tag_at[tagged], columns.tag_len[tagged]
    shift = np.zeros(len(lengths), dtype=np.int64)
    np.cumsum(lengths[:-1], out=shift[1:])
    gathered = raw[np.repeat(starts - shift, lengths) + np.arange(int(lengths.sum()))]
    try:
        gathered.tobytes().decode()
    except UnicodeDecodeError:
        raise RecordCorrupted("a message tag is not valid UTF-8", 0) from None
    if ((raw[starts] & 0xC0) == 0x80).any():
        raise RecordCorrupted("a message tag is not valid UTF-8 (it starts inside a character)", 0)
