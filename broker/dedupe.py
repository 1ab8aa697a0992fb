"""Idempotent producers: drop messages a producer already stored when it sends them again.

A producer that wants this names itself (``producerId``) and numbers its messages per queue
(``seq`` of the first message of a request; the rest follow). The broker remembers, per
(producer, topic, queue), the sequence number it expects next; a request that starts below it
is a resend, and the part already stored is dropped. The Spark sink uses a stable identity
per micro-batch partition (query id, batch id, partition), so a micro-batch that Spark
re-runs after a failure appends nothing twice.

The table is kept in memory, saved to ``<data_dir>/config/producers.json`` with every store
checkpoint and at shutdown, and entries unused for ``dedupe_retention_hours`` are forgotten.
"""

from __future__ import annotations

import time
from pathlib import Path

from broker.store.metafile import read_json, write_json_atomic

Key = tuple[str, str, int]  # producer id, topic, physical queue id


class ProducerTable:
    def __init__(self, path: Path, retention_hours: float) -> None:
        self.path = path
        self.retention_s = retention_hours * 3600
        self.next_seq: dict[Key, int] = {}
        self.last_used: dict[Key, float] = {}
        self.dirty = False
        self.duplicates_dropped = 0

    def load(self) -> None:
        data = read_json(self.path, default={"producers": []})
        for pid, topic, queue_id, nxt, used in data["producers"]:
            key = (pid, topic, int(queue_id))
            self.next_seq[key] = int(nxt)
            self.last_used[key] = float(used)

    def persist(self) -> None:
        if not self.dirty:
            return
        self.dirty = False
        cutoff = time.time() - self.retention_s
        for key in [k for k, used in self.last_used.items() if used < cutoff]:
            self.next_seq.pop(key, None)
            self.last_used.pop(key, None)
        rows = [[k[0], k[1], k[2], n, self.last_used[k]] for k, n in self.next_seq.items()]
        write_json_atomic(self.path, {"producers": rows})

    def already_stored(self, key: Key, seq: int, count: int) -> int:
        """How many messages at the front of a request starting at ``seq`` were stored before."""
        expected = self.next_seq.get(key)
        if expected is None or seq >= expected:
            return 0
        return min(count, expected - seq)

    def stored(self, key: Key, seq: int, count: int) -> None:
        self.next_seq[key] = max(self.next_seq.get(key, 0), seq + count)
        self.last_used[key] = time.time()
        self.dirty = True
