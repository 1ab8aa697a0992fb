"""The key index: a message's keys -> where it lies in the log, on disk (RocketMQ's IndexFile).

A thread follows the commit log behind the flusher: every record up to the flushed offset is
read back (a batch without keys costs three small reads), its messages' keys decoded
(``codec.columns``) and one row per key stored in an SQLite database next to the log
(``<store>/index/keys.db``), together with how far the log is indexed, in the same
transaction. So the index is durable, never points past what survives a
crash, and after a restart carries on from where it stopped. Nothing is added to a send.

A lookup returns candidates; the caller reads each back and keeps the messages that really
carry the key (rows of records cut after a failed write, or deleted by retention, drop out
there). Rows older than the log's first segment are purged as retention deletes segments.
"""

from __future__ import annotations

import logging
import sqlite3
import struct
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import msgpack
import numpy as np

from rocketspark.codec.columns import decode
from rocketspark.codec.layout import (
    BATCH_MAGIC,
    BLANK_MAGIC,
    COMPRESSION_MASK,
    HEADER_DTYPE,
    HEADER_SIZE,
    PREFIX,
    RecordCorrupted,
)

log = logging.getLogger(__name__)

ROUND_BYTES = 32 * 1024 * 1024  # the most of the log one indexing round reads
PROGRESS_BYTES = 64 * 1024 * 1024  # log without keys read before the progress alone is saved
_SCHEMA = """
CREATE TABLE IF NOT EXISTS keys (topic TEXT NOT NULL, key TEXT NOT NULL, phys INTEGER NOT NULL, idx INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS keys_by_key ON keys (topic, key);
CREATE TABLE IF NOT EXISTS progress (id INTEGER PRIMARY KEY CHECK (id = 0), indexed_to INTEGER NOT NULL);
"""


class IndexedLog(Protocol):
    """What the index reads: the store's log."""

    @property
    def flushed_offset(self) -> int: ...

    @property
    def log_min_offset(self) -> int: ...

    def read_record(self, phys: int, size: int) -> bytes | None: ...

    def segment_end(self, offset: int) -> int | None: ...


@dataclass(frozen=True, slots=True)
class KeyHit:
    phys: int  # the log offset of the message's batch record
    index: int  # its place in the batch


class KeyIndex:
    def __init__(self, path: Path, store: IndexedLog, interval_s: float = 0.2) -> None:
        self.path = path
        self.store = store
        self.interval_s = interval_s
        self.indexed_to = 0
        self.keys_indexed = 0
        self._lock = threading.Lock()  # one connection, used by the indexer and lookups
        self._db: sqlite3.Connection | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._purged_below = 0
        self._saved_to = 0  # the progress last saved (a restart re-reads keyless log after it)

    def open(self) -> None:
        """Open (or make) the database; a damaged one is moved aside and rebuilt from the log."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = self._connect()
        except sqlite3.DatabaseError as exc:
            aside = self.path.with_name(self.path.name + ".damaged")
            log.warning("key index %s is damaged (%s): moved to %s and rebuilt from the log", self.path, exc, aside)
            self.path.replace(aside)
            self._db = self._connect()
        self._thread = threading.Thread(target=self._run, name="key-index", daemon=True)
        self._thread.start()

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("PRAGMA wal_autocheckpoint=256")  # a WAL of at most ~1 MiB
        db.executescript(_SCHEMA)
        db.execute("PRAGMA quick_check").fetchone()
        row = db.execute("SELECT indexed_to FROM progress WHERE id = 0").fetchone()
        self.indexed_to = self._saved_to = int(row[0]) if row else 0
        return db

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
            self._thread = None
        if self.indexed_to > self._saved_to:
            try:
                self._store([], self.indexed_to)
            except sqlite3.Error as exc:  # a full disk: the next start reads that part of the log again
                log.warning("key index: could not save its progress at shutdown: %s", exc)
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    def lookup(self, topic: str, key: str, limit: int) -> list[KeyHit]:
        """Where messages of ``topic`` with ``key`` may be, newest first."""
        with self._lock:
            if self._db is None:
                return []
            rows = self._db.execute(
                "SELECT phys, idx FROM keys WHERE topic = ? AND key = ? ORDER BY phys DESC, idx DESC LIMIT ?",
                (topic, key, limit),
            ).fetchall()
        return [KeyHit(int(p), int(i)) for p, i in rows]

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
        end = self.store.flushed_offset
        pos = start = max(self.indexed_to, self.store.log_min_offset)
        rows: list[tuple[str, str, int, int]] = []
        while pos < end and pos - start < ROUND_BYTES:
            step = self._record_at(pos, rows)
            if step is None:
                break
            pos = step
        if rows or pos - self._saved_to >= PROGRESS_BYTES:
            self._store(rows, pos)
        self.indexed_to = max(self.indexed_to, pos)
        if pos >= end:
            self._purge()
        return start < pos < end

    def _record_at(self, pos: int, rows: list[tuple[str, str, int, int]]) -> int | None:
        """Index the record at ``pos`` into ``rows``; where the next one starts (None: stop for
        this round, the log is not readable there yet)."""
        prefix = self.store.read_record(pos, PREFIX.size)
        if prefix is None:  # deleted by retention meanwhile, or the end of what is written
            floor = self.store.log_min_offset
            return floor if floor > pos else None
        size, magic = (int(v) for v in PREFIX.unpack(prefix))
        segment_end = self.store.segment_end(pos)
        if magic == BLANK_MAGIC or segment_end is None or size < PREFIX.size or pos + size > segment_end:
            after: int | None = segment_end if segment_end is not None and segment_end > pos else None
            return after  # the padding at a segment's end (or damage): the next segment
        if magic == BATCH_MAGIC and size >= HEADER_SIZE:
            head = self.store.read_record(pos, HEADER_SIZE)
            if head is None:
                return None
            rows.extend(self._keys_of(pos, size, head))
        return pos + size  # a batch, or a gap recovery cut out

    def _keys_of(self, pos: int, size: int, head: bytes) -> Iterator[tuple[str, str, int, int]]:
        fields = np.frombuffer(head, dtype=HEADER_DTYPE, count=1)[0]
        count, topic_len = int(fields["count"]), int(fields["topic_len"])
        if not int(fields["attributes"]) & COMPRESSION_MASK:
            # the ext offsets' last entry is the size of every message's keys and properties
            at = pos + HEADER_SIZE + topic_len + 4 * (count + 1) * 2 + 4 * count
            ext = self.store.read_record(at, 4)
            if ext is not None and struct.unpack("<I", ext)[0] == 0:
                return  # no message of the batch has keys: nothing more to read
        raw = self.store.read_record(pos, size)
        if raw is None:
            return
        try:
            columns = decode(raw)
        except RecordCorrupted as exc:  # the scrubber and readers report damage; the index skips it
            log.warning("key index: record at log offset %d not indexed: %s", pos, exc)
            return
        topic = raw[HEADER_SIZE : HEADER_SIZE + topic_len].decode()
        data = columns.data
        for i in np.flatnonzero(columns.ext_len).tolist():
            at = int(columns.ext_at[i])
            try:
                keys = msgpack.unpackb(data[at : at + int(columns.ext_len[i])])[0]
            except (ValueError, TypeError, IndexError, msgpack.UnpackException):
                continue
            for key in _key_list(keys):
                yield topic, key, pos, int(columns.index[i])

    def _store(self, rows: list[tuple[str, str, int, int]], reached: int) -> None:
        with self._lock:
            db = self._db
            if db is None:
                return
            db.execute("BEGIN")
            try:
                db.executemany("INSERT INTO keys VALUES (?, ?, ?, ?)", rows)
                db.execute("INSERT OR REPLACE INTO progress VALUES (0, ?)", (reached,))
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
        self.indexed_to = self._saved_to = reached
        self.keys_indexed += len(rows)

    def _purge(self) -> None:
        """Drop rows of deleted segments (rows go in log order, so theirs are the first)."""
        floor = self.store.log_min_offset
        if floor <= self._purged_below:
            return
        with self._lock:
            if self._db is not None:
                self._db.execute("DELETE FROM keys WHERE phys < ?", (floor,))
        self._purged_below = floor


def _key_list(keys: object) -> list[str]:
    """A message's keys as stored: a list of strings (RocketMQ's space-separated string also)."""
    if isinstance(keys, str):
        return [k for k in keys.split(" ") if k]
    if isinstance(keys, list):
        return [k for k in keys if isinstance(k, str) and k]
    return []
