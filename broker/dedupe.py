"""Idempotent producers: drop messages a producer already stored when it sends them again.

A producer that wants this names itself (``producerId``) and numbers its messages per queue
(``seq`` of the first message of a request; the rest follow). The broker remembers, per
(producer, topic, queue), the sequence number it expects next; a request that starts below it
is a resend, and the part already stored is dropped. The Spark sink uses a stable identity
per micro-batch partition (query id, batch id, partition), so a micro-batch that Spark
re-runs after a failure appends nothing twice.

The table is kept in memory and saved to ``<data_dir>/config/producers.json`` every
``checkpoint_interval_ms`` and at shutdown; entries unused for ``dedupe_retention_hours`` are
forgotten. Only sequences whose records the commit log has flushed are saved: a saved
sequence ahead of the log would, after an OS crash cut the unflushed tail, make the broker
drop the producer's resend of the lost messages as duplicates. Each saved row also carries
the log offset its records end at, so that a row beyond the log recovered after a crash is
forgotten on start (the resend is then stored again rather than lost).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from pathlib import Path
from typing import Any

from broker.metadata import ProducersFile
from broker.store.metafile import SnapshotFile, read_json

Key = tuple[str, str, int]  # producer id, topic, physical queue id


class ProducerTable:
    def __init__(self, path: Path, retention_hours: float) -> None:
        self.file = SnapshotFile(path)
        self.retention_s = retention_hours * 3600
        self.next_seq: dict[Key, int] = {}  # what sends are checked against, flushed or not
        self.last_used: dict[Key, float] = {}
        self.durable: dict[Key, tuple[int, int]] = {}  # next seq, log end of its records: flushed
        self._unflushed: deque[tuple[int, Key, int]] = deque()  # (log end, key, next seq), log order
        self.duplicates_dropped = 0

    def load(self) -> None:
        data = read_json(self.file.path, default={"producers": []}, shape=ProducersFile)
        for row in data["producers"]:
            pid, topic, queue_id, nxt, used = row[:5]
            key = (pid, topic, int(queue_id))
            end = int(row[5]) if len(row) > 5 else 0  # files written before the log end was kept
            self.next_seq[key] = int(nxt)
            self.last_used[key] = float(used)
            self.durable[key] = (int(nxt), end)

    def adopt(self, rows: list[list[Any]]) -> None:
        """Take the master's sequences (a slave): rows of ``snapshot``; a resend to this
        replica once it is master is then dropped as the master would have."""
        for pid, topic, queue_id, nxt, used, end in (list(r) + [0] * (6 - len(r)) for r in rows):
            key = (str(pid), str(topic), int(queue_id))
            self.next_seq[key] = max(self.next_seq.get(key, 0), int(nxt))
            self.last_used[key] = float(used)
            self.durable[key] = (self.next_seq[key], int(end))
        self.file.changed()

    def forget_beyond(self, log_end: int) -> list[Key]:
        """After recovery: forget producers whose saved sequence covers records past ``log_end``
        (cut by recovery); their resends are then stored, not dropped."""
        lost = [key for key, (_, end) in self.durable.items() if end > log_end]
        for key in lost:
            del self.durable[key]
            self.next_seq.pop(key, None)
            self.last_used.pop(key, None)
        if lost:
            self.file.changed()
        return lost

    def snapshot(self, flushed_offset: int) -> dict[str, Any]:
        """Take in what the log has flushed up to ``flushed_offset``, forget expired producers,
        and return the file's content."""
        unflushed = self._unflushed
        while unflushed and unflushed[0][0] <= flushed_offset:
            end, key, nxt = unflushed.popleft()
            if key in self.last_used:  # not forgotten meanwhile
                self.durable[key] = (nxt, end)
                self.file.changed()
        cutoff = time.time() - self.retention_s
        for key in [k for k, used in self.last_used.items() if used < cutoff]:
            self.next_seq.pop(key, None)
            self.last_used.pop(key, None)
            if self.durable.pop(key, None) is not None:
                self.file.changed()
        rows = [[k[0], k[1], k[2], nxt, self.last_used[k], end] for k, (nxt, end) in self.durable.items()]
        return {"producers": rows}

    async def save(self, flushed_offset: int) -> None:
        """Periodic save: snapshot on the event loop, write in a thread."""
        data = self.snapshot(flushed_offset)
        if self.file.dirty:
            await asyncio.to_thread(self.file.write, data, self.file.version)

    def persist(self, flushed_offset: int) -> None:
        """Save now (shutdown, after the store flushed everything)."""
        data = self.snapshot(flushed_offset)
        if self.file.dirty:
            self.file.write(data, self.file.version)

    def already_stored(self, key: Key, seq: int, count: int) -> int:
        """How many messages at the front of a request starting at ``seq`` were stored before."""
        expected = self.next_seq.get(key)
        if expected is None or seq >= expected:
            return 0
        return min(count, expected - seq)

    def stored(self, key: Key, seq: int, count: int, end_offset: int) -> None:
        """Messages ``seq`` .. ``seq + count - 1`` were appended; their records end at log
        offset ``end_offset``."""
        nxt = self.next_seq[key] = max(self.next_seq.get(key, 0), seq + count)
        self.last_used[key] = time.time()
        self._unflushed.append((end_offset, key, nxt))
