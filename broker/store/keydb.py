"""The key index's database: SQLite next to the log (``<store>/index/keys.db``, WAL mode).

One writer (the indexer's connection) and a reader for look-ups (WAL lets it read while the
writer commits, so a look-up never waits for an indexing round). Three tables, rows in log
order (so the oldest rows are the first rowids):

- ``keys``: (topic, key, log offset of the batch, place in the batch), one per message key;
- ``batches``: (log offset, first client id, count), one per batch record that has ids: a
  message's client id is found as the batch whose range ``[first, first + count)`` holds it
  (BLOBs compare byte by byte, so big-endian ids compare as numbers), per batch, not per
  message (``codec.ids``);
- ``uniq_keys``: (id, log offset, place), one per message that carries a ``UNIQ_KEY`` of its
  own (a foreign client's id), as RocketMQ's index holds every ``UNIQ_KEY``.

The progress (how far the log is indexed) is stored in the same transaction as its rows. An
index made before the last two tables existed (``SCHEMA_VERSION``) is emptied and made again
from the log, so that its messages' ids are found too.
"""

from __future__ import annotations

import itertools
import logging
import sqlite3
import threading
from pathlib import Path
from typing import Any

from rocketspark.errors import ConfigError

log = logging.getLogger(__name__)

Row = tuple[str, str, int, int]  # topic, key, log offset, place
BatchRow = tuple[int, bytes, int]  # log offset, first client id, count
IdRow = tuple[str, int, int]  # UNIQ_KEY, log offset, place
SCHEMA_VERSION = 2  # 1: keys only
_SCHEMA = """
CREATE TABLE IF NOT EXISTS keys (topic TEXT NOT NULL, key TEXT NOT NULL, phys INTEGER NOT NULL, idx INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS keys_by_key ON keys (topic, key);
CREATE TABLE IF NOT EXISTS batches (phys INTEGER PRIMARY KEY, first BLOB NOT NULL, count INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS batches_by_first ON batches (first);
CREATE TABLE IF NOT EXISTS uniq_keys (key TEXT NOT NULL, phys INTEGER NOT NULL, idx INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS uniq_keys_by_key ON uniq_keys (key);
CREATE TABLE IF NOT EXISTS progress (id INTEGER PRIMARY KEY CHECK (id = 0), indexed_to INTEGER NOT NULL);
"""
ROWS_PER_STATEMENT = 500  # rows an INSERT carries, if SQLite takes that many variables (4 a row)
_DAMAGE = ("not a database", "malformed", "corrupt")  # what SQLite says of a damaged file


def insert_rows(db: sqlite3.Connection, sql: str, rows: list[Any]) -> None:
    """``executemany`` of an ``INSERT ... VALUES (?, ...)``, up to ``ROWS_PER_STATEMENT`` rows
    a statement: sqlite3 lets the GIL go at every step, and a step a row made the indexer and
    the event loop trade the GIL at every row (a round of a service's one-message sends is
    thousands of rows), which cost the loop more than the rows did. A statement carries no
    more variables than this SQLite takes (999 before SQLite 3.32)."""
    if not rows:
        return
    head, _, group = sql.partition(" VALUES ")
    per = max(1, min(ROWS_PER_STATEMENT, db.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) // len(rows[0])))
    for start in range(0, len(rows), per):
        chunk = rows[start : start + per]
        db.execute(f"{head} VALUES {', '.join([group] * len(chunk))}", list(itertools.chain.from_iterable(chunk)))


class KeyDb:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._write: sqlite3.Connection | None = None
        self._read: sqlite3.Connection | None = None
        self._write_lock = threading.Lock()
        self._read_lock = threading.Lock()

    def open(self) -> int:
        """Open (or make) the database; return how far the log is indexed. A damaged file is
        moved aside (with its WAL) and the index rebuilt from the log; any other failure is a
        ConfigError naming the file."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            try:
                return self._open()
            except sqlite3.DatabaseError as damaged:
                if not any(word in str(damaged).lower() for word in _DAMAGE):
                    raise
                self._set_aside(damaged)
                return self._open()
        except sqlite3.Error as exc:
            self.close()
            raise ConfigError(
                f"the key index {self.path} cannot be opened: {exc}; check the data directory's permissions and free "
                "space, or set key_index_enable = false"
            ) from exc

    def _open(self) -> int:
        self.close()
        db = self._write = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("PRAGMA wal_autocheckpoint=256")  # a WAL of at most ~1 MiB
        db.executescript(_SCHEMA)
        if db.execute("PRAGMA user_version").fetchone()[0] < SCHEMA_VERSION:
            # rows of an older index lack the client ids: index the whole log again (the rows
            # that were there would come twice)
            db.executescript(
                "BEGIN; DELETE FROM keys; DELETE FROM batches; DELETE FROM uniq_keys; DELETE FROM progress;"
            )
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            db.execute("COMMIT")
        row = db.execute("SELECT indexed_to FROM progress WHERE id = 0").fetchone()
        self._read = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, check_same_thread=False)
        return int(row[0]) if row else 0

    def _set_aside(self, exc: Exception) -> None:
        self.close()
        for suffix in ("", "-wal", "-shm"):
            part = self.path.with_name(self.path.name + suffix)
            if part.exists():
                part.replace(part.with_name(part.name + ".damaged"))
        log.warning("key index %s is damaged (%s): moved aside (.damaged) and rebuilt from the log", self.path, exc)

    def close(self) -> None:
        with self._read_lock:
            if self._read is not None:
                self._read.close()
                self._read = None
        with self._write_lock:
            if self._write is not None:
                self._write.close()
                self._write = None

    def lookup(self, topic: str, key: str, limit: int) -> list[tuple[int, int]]:
        """(log offset, place) of the rows of ``topic`` with ``key``, newest first."""
        with self._read_lock:
            if self._read is None:
                return []
            rows = self._read.execute(
                "SELECT phys, idx FROM keys WHERE topic = ? AND key = ? ORDER BY phys DESC, idx DESC LIMIT ?",
                (topic, key, limit),
            ).fetchall()
        return [(int(p), int(i)) for p, i in rows]

    def lookup_id(self, raw: bytes | None, text: str, limit: int) -> list[tuple[int, int]]:
        """(log offset, place) of the messages whose client id may be ``text``: by its bytes
        (``raw``, when it has our producers' layout) in the batches' ranges, and as a string
        among the messages' own ``UNIQ_KEY``s. Candidates: the caller reads them back."""
        found: list[tuple[int, int]] = []
        with self._read_lock:
            if self._read is None:
                return []
            if raw is not None:
                want = int.from_bytes(raw, "big")
                rows = self._read.execute(
                    "SELECT phys, first, count FROM batches WHERE first = "
                    "(SELECT max(first) FROM batches WHERE first <= ?) ORDER BY phys LIMIT ?",
                    (raw, limit),
                ).fetchall()
                for phys, low, count in rows:
                    place = want - int.from_bytes(low, "big")
                    if 0 <= place < count:
                        found.append((int(phys), place))
            for key in dict.fromkeys((text, text.upper())):
                rows = self._read.execute(
                    "SELECT phys, idx FROM uniq_keys WHERE key = ? ORDER BY phys LIMIT ?", (key, limit)
                ).fetchall()
                found += [(int(p), int(i)) for p, i in rows]
        return found

    def _transaction(self, *statements: tuple[str, tuple[object, ...] | list[Any]]) -> None:
        with self._write_lock:
            db = self._write
            if db is None:
                return
            db.execute("BEGIN")
            try:
                for sql, params in statements:
                    if isinstance(params, list):
                        insert_rows(db, sql, params)
                    else:
                        db.execute(sql, params)
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise

    def add(
        self, rows: list[Row], indexed_to: int, batches: list[BatchRow] | None = None, ids: list[IdRow] | None = None
    ) -> None:
        self._transaction(
            ("INSERT INTO keys VALUES (?, ?, ?, ?)", rows),
            ("INSERT OR REPLACE INTO batches VALUES (?, ?, ?)", batches or []),
            ("INSERT INTO uniq_keys VALUES (?, ?, ?)", ids or []),
            ("INSERT OR REPLACE INTO progress VALUES (0, ?)", (indexed_to,)),
        )

    def drop_before(self, offset: int) -> None:
        """Rows of log deleted by retention: the first rowids, up to the first row at ``offset``
        or after (found by walking rowids from the start: as many steps as rows dropped)."""
        kept = "SELECT rowid FROM {0} WHERE phys >= ? ORDER BY rowid LIMIT 1"
        below = "DELETE FROM {0} WHERE rowid < COALESCE((" + kept + "), (SELECT max(rowid) + 1 FROM {0}))"
        self._transaction(
            (below.format("keys"), (offset,)),
            (below.format("uniq_keys"), (offset,)),
            ("DELETE FROM batches WHERE phys < ?", (offset,)),
        )

    def cut(self, offset: int) -> None:
        """The log was cut at ``offset``: its rows after the cut go, and indexing resumes there."""
        self._transaction(
            ("DELETE FROM keys WHERE phys >= ?", (offset,)),
            ("DELETE FROM batches WHERE phys >= ?", (offset,)),
            ("DELETE FROM uniq_keys WHERE phys >= ?", (offset,)),
            ("INSERT OR REPLACE INTO progress VALUES (0, ?)", (offset,)),
        )
