"""The key index: a message's keys and client id -> where it lies in the log, on disk
(RocketMQ's IndexFile, which holds keys and ``UNIQ_KEY``s).

A thread follows the commit log behind the flusher: every record up to the flushed offset is
read back (a batch without keys costs three small reads), its messages' keys decoded
(``codec.columns``) and one row per key stored in an SQLite database next to the log
(``<store>/index/keys.db``), together with how far the log is indexed, in the same
transaction. So the index is durable, never points past what survives a
crash, and after a restart carries on from where it stopped. Nothing is added to a send.

Client ids (``codec.ids``) cost one row per batch, its first id and count, read from the
header the indexer reads anyway; a message that carries a ``UNIQ_KEY`` property of its own (an
official or 4.x client's id) gets a row of its own, from the properties decoded with its keys.

A lookup returns candidates; the caller reads each back and keeps the messages that really
carry the key (rows of records cut after a failed write, or deleted by retention, drop out
there). Rows older than the log's first segment are purged as retention deletes segments.
"""

from __future__ import annotations

import logging
import sqlite3
import struct
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import msgpack
import numpy as np

from broker.store.keydb import BatchRow, IdRow, KeyDb, Row
from rocketspark.codec.columns import decode
from rocketspark.codec.layout import (
    BATCH_MAGIC,
    BLANK_MAGIC,
    COMPRESSION_MASK,
    F_ATTRIBUTES,
    F_COUNT,
    F_TOPIC_LEN,
    F_VERSION,
    HEADER,
    HEADER_SIZE,
    PREFIX,
    RecordCorrupted,
    first_id_of,
    head_size,
)
from rocketspark.protocol.properties import UNIQ_KEY

log = logging.getLogger(__name__)

ROUND_BYTES = 16 * 1024 * 1024  # the most of the log one indexing round reads
PROGRESS_BYTES = 64 * 1024 * 1024  # log without keys read before the progress alone is saved
WINDOW_BYTES = 256 * 1024  # the log read ahead at once (small records: many in one read)
SMALL_RECORD = 16 * 1024  # after a record this small, the next read reads ahead; after a larger one, only a header
_EXT_END = struct.Struct("<I")  # a message section's last ext offset: the size of all its keys and properties


class IndexedLog(Protocol):
    """What the index reads: the store's log."""

    @property
    def indexable_end(self) -> int: ...

    @property
    def cut(self) -> tuple[int, int]: ...

    @property
    def log_min_offset(self) -> int: ...

    def read_record(self, phys: int, size: int) -> bytes | None: ...

    def segment_end(self, offset: int) -> int | None: ...


@dataclass(frozen=True, slots=True)
class KeyHit:
    phys: int  # the log offset of the message's batch record
    index: int  # its place in the batch


@dataclass(slots=True)
class _Found:
    """The rows one indexing round found."""

    keys: list[Row] = field(default_factory=list)
    batches: list[BatchRow] = field(default_factory=list)
    ids: list[IdRow] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.keys or self.batches or self.ids)


class KeyIndex:
    def __init__(self, path: Path, store: IndexedLog, interval_s: float = 0.2) -> None:
        self.db = KeyDb(path)
        self.store = store
        self.interval_s = interval_s
        self.indexed_to = 0
        self.keys_indexed = 0
        self._stop = threading.Event()
        self._worker: threading.Thread | None = None
        self._purged_below = 0
        self._saved_to = 0  # the progress last saved (a restart re-reads keyless log after it)
        self._cut = store.cut  # the log's last cut, as last seen
        self._window = b""  # log read ahead (``_read``), from log offset _window_at; dropped every round
        self._window_at = 0
        self._ahead = True  # the last record was small: read the log ahead (a large one's body is never read)

    def open(self) -> None:
        self.indexed_to = self._saved_to = self.db.open()
        self._worker = threading.Thread(target=self._run, name="key-index", daemon=True)
        self._worker.start()

    def close(self) -> None:
        self._stop.set()
        if self._worker is not None:
            self._worker.join(30)
            self._worker = None
        if self.indexed_to > self._saved_to:
            try:
                self.db.add([], self.indexed_to)
            except sqlite3.Error as exc:  # a full disk: the next start reads that part of the log again
                log.warning("key index: could not save its progress at shutdown: %s", exc)
        self.db.close()

    def lookup(self, topic: str, key: str, limit: int) -> list[KeyHit]:
        """Where messages of ``topic`` with ``key`` may be, newest first."""
        return [KeyHit(phys, index) for phys, index in self.db.lookup(topic, key, limit)]

    def lookup_id(self, raw: bytes | None, text: str, limit: int) -> list[KeyHit]:
        """Where messages whose client id is ``text`` may be (``raw``: its bytes, when it is
        in our producers' layout, ``ids.parse_client_id``), oldest first."""
        return [KeyHit(phys, index) for phys, index in self.db.lookup_id(raw, text, limit)]

    # -- the indexer -------------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                while self.index_round() and not self._stop.is_set():
                    pass
            except sqlite3.Error as exc:  # e.g. a full disk: nothing is half-stored; retried later
                log.warning("key index: indexing at log offset %d failed (%s); retrying in 5 s", self.indexed_to, exc)
                self._stop.wait(5)
            except Exception:  # the next round tries again; lookups go on meanwhile
                log.exception("key index round failed at log offset %d; will retry", self.indexed_to)
                self._stop.wait(5)

    def index_round(self) -> bool:
        """Index the flushed log after ``indexed_to``, at most ``ROUND_BYTES`` of it; True when
        there is more to do. The log is read with ``pread`` (never through a mapping: this
        thread must not pin a segment retention is deleting, nor count its pages as resident)."""
        self._window = b""  # the log below the indexable end changes only by a cut: read it afresh
        self._follow_cut()
        end = self.store.indexable_end
        pos = start = max(self.indexed_to, self.store.log_min_offset)
        found = _Found()
        while pos < end and pos - start < ROUND_BYTES:
            step = self._record_at(pos, end, found)
            if step is None:
                break
            pos = step
        if found or pos - self._saved_to >= PROGRESS_BYTES:
            self.db.add(found.keys, pos, found.batches, found.ids)
            self._saved_to = pos
            self.keys_indexed += len(found.keys)
        self.indexed_to = max(self.indexed_to, pos)
        if pos >= end:
            self._purge()
        return start < pos < end

    def _follow_cut(self) -> None:
        """A replica rejoining its group cut its log: forget what was indexed past the cut."""
        cut = self.store.cut
        if cut != self._cut:
            self._cut = cut
            if cut[1] < self.indexed_to:
                self.db.cut(cut[1])
                self.indexed_to = self._saved_to = cut[1]

    def _read(self, pos: int, size: int) -> bytes | None:
        """``size`` bytes of the log at ``pos``, from a window of it read ahead (one ``pread``
        serves many small records: a service sending one message at a time makes a record a
        message), never across a segment's end nor past the indexable end. After a large
        record, only what is asked (and a header's worth) is read: reading ahead there would
        read every batch's messages back to learn its header."""
        window, at = self._window, self._window_at
        if at <= pos and pos + size <= at + len(window):
            return window[pos - at : pos - at + size]
        segment_end = self.store.segment_end(pos)
        limit = min(self.store.indexable_end, segment_end if segment_end is not None else pos + size)
        window_bytes = max(size, min(WINDOW_BYTES if self._ahead else HEADER_SIZE, limit - pos))
        data = self.store.read_record(pos, window_bytes)
        if data is None or len(data) < size:
            self._window = b""
            return None if data is None or len(data) < size else data
        self._window, self._window_at = data, pos
        return data[:size]

    def _record_at(self, pos: int, end: int, found: _Found) -> int | None:
        """Index the record at ``pos`` into ``found``; where the next one starts (None: stop
        for this round: the log is not readable there yet, or the record ends past ``end``)."""
        in_window = self._in_window(pos, end, found)
        if in_window is not None:
            return in_window
        prefix = self._read(pos, PREFIX.size)
        if prefix is None:  # deleted by retention meanwhile, or the end of what is written
            floor = self.store.log_min_offset
            return floor if floor > pos else None
        size, magic = (int(v) for v in PREFIX.unpack(prefix))
        segment_end = self.store.segment_end(pos)
        if magic == BLANK_MAGIC or segment_end is None or size < PREFIX.size or pos + size > segment_end:
            after: int | None = segment_end if segment_end is not None and segment_end > pos else None
            return after  # the padding at a segment's end (or damage): the next segment
        if pos + size > end:
            return None  # not whole below the indexable end yet (a slave's copy may end mid-record)
        self._ahead = size <= SMALL_RECORD
        if magic == BATCH_MAGIC and size >= HEADER_SIZE:
            head = self._read(pos, HEADER_SIZE)
            if head is None:
                return None
            fields = HEADER.unpack_from(head)
            first = first_id_of(fields)
            if first is not None:
                found.batches.append((pos, first, int(fields[F_COUNT])))
            self._keys_of(pos, size, fields, found)
        return pos + size  # a batch, or a gap recovery cut out

    def _in_window(self, pos: int, end: int, found: _Found) -> int | None:
        """``_record_at`` of the common case, a whole batch record inside the window read
        ahead (so inside one segment and below the indexable end), its fields read in place:
        a service sending one message at a time makes a record a message, and this is most of
        what indexing it costs. None: not that case (``_record_at`` reads it the long way)."""
        window, rel = self._window, pos - self._window_at
        if rel < 0 or rel + HEADER_SIZE > len(window):
            return None
        size: int
        magic: int
        size, magic = PREFIX.unpack_from(window, rel)
        if magic != BATCH_MAGIC or size < HEADER_SIZE or rel + size > len(window) or pos + size > end:
            return None
        self._ahead = size <= SMALL_RECORD
        fields = HEADER.unpack_from(window, rel)
        first = first_id_of(fields)
        if first is not None:
            found.batches.append((pos, first, fields[F_COUNT]))
        self._keys_of(pos, size, fields, found)  # its reads are the window's too
        return pos + size

    def _keys_of(self, pos: int, size: int, fields: tuple[Any, ...], found: _Found) -> None:
        """The record's keys and its messages' own ``UNIQ_KEY``s, into ``found``."""
        version, attributes, topic_len, count = (
            fields[F_VERSION],
            fields[F_ATTRIBUTES],
            fields[F_TOPIC_LEN],
            fields[F_COUNT],
        )
        topic_at = head_size(version)
        if not attributes & COMPRESSION_MASK:
            # the ext offsets' last entry is the size of every message's keys and properties
            at = pos + topic_at + topic_len + 4 * (count + 1) * 2 + 4 * count
            ext = self._read(at, 4)
            if ext is not None and _EXT_END.unpack(ext)[0] == 0:
                return  # no message of the batch has keys: nothing more to read
        raw = self._read(pos, size)
        if raw is None:
            return
        try:
            columns = decode(raw)
        except RecordCorrupted as exc:  # the scrubber and readers report damage; the index skips it
            log.warning("key index: record at log offset %d not indexed: %s", pos, exc)
            return
        topic = raw[topic_at : topic_at + topic_len].decode()
        data = columns.data
        for i in np.flatnonzero(columns.ext_len).tolist():
            at = int(columns.ext_at[i])
            try:
                keys, properties = msgpack.unpackb(data[at : at + int(columns.ext_len[i])])
            except (ValueError, TypeError, IndexError, msgpack.UnpackException):
                continue
            place = int(columns.index[i])
            found.keys += [(topic, key, pos, place) for key in _key_list(keys)]
            own = properties.get(UNIQ_KEY) if isinstance(properties, dict) else None
            if isinstance(own, str) and own:
                found.ids.append((own, pos, place))

    def _purge(self) -> None:
        """Drop the rows of segments retention deleted."""
        floor = self.store.log_min_offset
        if floor > self._purged_below:
            self.db.drop_before(floor)
            self._purged_below = floor


def _key_list(keys: object) -> list[str]:
    """A message's keys as stored: a list of strings (RocketMQ's space-separated string also)."""
    if isinstance(keys, str):
        return [k for k in keys.split(" ") if k]
    if isinstance(keys, list):
        return [k for k in keys if isinstance(k, str) and k]
    return []
