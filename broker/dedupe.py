"""Idempotent producers: a batch a producer already stored is not stored again.

A producer that wants this names itself in each batch record's header (producer id, epoch,
base sequence: :mod:`rocketspark.codec.layout`) and numbers its messages per queue. The
broker remembers, per (producer, topic, queue), the epoch and the sequence it expects next:

- a batch whose sequence starts below it is a resend: the part already stored is dropped
  (all of it, usually; the front of it when a resend overlaps what was stored);
- a batch from an older epoch than the newest seen is refused (a fenced producer: a newer
  incarnation of it has written since), with ``ProducerFencedError``;
- a newer epoch starts the numbering afresh.

The Spark sink names each micro-batch partition (query id, batch id, partition), so a
micro-batch Spark re-runs after a failure appends nothing twice.

The state is rebuilt from the log, not trusted to a timer: the table is saved to
``<data_dir>/config/producers.json`` with the log offset it is current up to (only records
the commit log has flushed count), and at start the broker replays the headers of every
batch after that offset (``replay``). A broker SIGKILLed right after acknowledging a batch
therefore still drops its resend. Entries unused for ``dedupe_retention_hours`` are
forgotten.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from broker.metadata import ProducersFile
from broker.store.metafile import SnapshotFile, read_json
from broker.store.scan import ScannedRecord
from rocketspark.errors import ProducerFencedError

Key = tuple[int, str, int]  # producer id, topic, physical queue id
REPLAY_BOUND = 64 * 1024 * 1024  # the file is saved again once the log grew this much: what a start replays


@dataclass(slots=True)
class State:
    epoch: int
    next_seq: int
    used: float  # epoch seconds
    end: int  # log offset just past the producer's newest batch on this queue


class ProducerTable:
    def __init__(self, path: Path, retention_hours: float) -> None:
        self.file = SnapshotFile(path)
        self.retention_s = retention_hours * 3600
        self.states: dict[Key, State] = {}  # what sends are checked against, flushed or not
        self.durable: dict[Key, State] = {}  # what the flushed log holds: what is saved
        self._unflushed: deque[tuple[Key, State]] = deque()  # log order
        self.saved_upto = 0  # the durable table holds every batch before this log offset
        self.following = False  # a slave's table is its master's: its watermark is the master's
        self.duplicates_dropped = 0

    def load(self) -> None:
        data = read_json(self.file.path, default={"producers": []}, shape=ProducersFile)
        self.saved_upto = int(data.get("log", 0))
        for pid, topic, queue_id, epoch, nxt, used, end in data["producers"]:
            key = (int(pid), str(topic), int(queue_id))
            self.states[key] = State(int(epoch), int(nxt), float(used), int(end))
            self.durable[key] = State(int(epoch), int(nxt), float(used), int(end))

    def replay(self, key: Key, epoch: int, seq: int, count: int, end: int, used: float) -> None:
        """A batch found in the log after ``saved_upto`` (at start, in log order)."""
        state = self.states.get(key)
        if state is None or epoch > state.epoch or (epoch == state.epoch and seq + count > state.next_seq):
            self.states[key] = State(epoch, seq + count, used, end)
            self._unflushed.append((key, self.states[key]))

    def replay_log(self, records: Iterable[ScannedRecord]) -> int:
        """Take in the batches the log holds after ``saved_upto`` (at start, and when a slave
        takes office: its log is its master's, byte for byte); return how many named a
        producer."""
        seen = 0
        for rec in records:
            if rec.producer_id:
                key = (rec.producer_id, rec.topic, rec.queue_id)
                self.replay(
                    key, rec.producer_epoch, rec.base_sequence, rec.count, rec.phys + rec.size, rec.store_ms / 1000
                )
                seen += 1
        self.following = False
        return seen

    def follow(self, rows: list[list[Any]], upto: int) -> None:
        """A slave takes its master's table, current up to log offset ``upto``."""
        self.adopt(rows)
        self.saved_upto = upto
        self.following = True

    def adopt(self, rows: list[list[Any]]) -> None:
        """Take another broker's sequences: a slave takes its master's, the new leader of a
        remapped queue takes the old leader's (rows as ``snapshot`` gives them)."""
        for pid, topic, queue_id, epoch, nxt, used, end in rows:
            key = (int(pid), str(topic), int(queue_id))
            mine = self.states.get(key)
            if mine is None or (int(epoch), int(nxt)) > (mine.epoch, mine.next_seq):
                self.states[key] = State(int(epoch), int(nxt), float(used), int(end))
                self.durable[key] = State(int(epoch), int(nxt), float(used), int(end))
        self.file.changed()

    def rows_for(self, topic: str, queue_id: int, *, as_queue: int | None = None) -> list[list[Any]]:
        """The sequences of every producer of one queue, relabelled to ``as_queue`` (the
        physical queue a remapped logical queue writes next, on its new broker)."""
        target = queue_id if as_queue is None else as_queue
        return [
            [k[0], k[1], target, s.epoch, s.next_seq, s.used, 0]
            for k, s in self.states.items()
            if k[1] == topic and k[2] == queue_id
        ]

    def forget_beyond(self, log_end: int) -> list[Key]:
        """After recovery: forget producers whose saved sequence covers records past ``log_end``
        (cut by recovery); their resends are then stored, not dropped."""
        lost = [key for key, state in self.durable.items() if state.end > log_end]
        for key in lost:
            del self.durable[key]
            self.states.pop(key, None)
        if lost:
            self.file.changed()
        return lost

    def snapshot(self, flushed_offset: int) -> dict[str, Any]:
        """Take in what the log has flushed up to ``flushed_offset``, forget expired producers,
        and return the file's content."""
        unflushed = self._unflushed
        while unflushed and unflushed[0][1].end <= flushed_offset:
            key, state = unflushed.popleft()
            saved = self.durable.get(key)
            # not forgotten meanwhile, and not behind what was adopted since (a master's rows)
            if key in self.states and (saved is None or (state.epoch, state.next_seq) > (saved.epoch, saved.next_seq)):
                self.durable[key] = state
                self.file.changed()
        cutoff = time.time() - self.retention_s
        for key in [k for k, s in self.states.items() if s.used < cutoff]:
            self.states.pop(key, None)
            if self.durable.pop(key, None) is not None:
                self.file.changed()
        if not self.following and (flushed_offset - self.saved_upto > REPLAY_BOUND or self.file.dirty):
            self.saved_upto = flushed_offset  # every batch before it is in the rows: none after is
            self.file.changed()
        rows = [[k[0], k[1], k[2], s.epoch, s.next_seq, s.used, s.end] for k, s in self.durable.items()]
        return {"log": self.saved_upto, "producers": rows}

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

    def already_stored(self, key: Key, epoch: int, seq: int, count: int) -> int:
        """How many messages at the front of a batch starting at ``seq`` were stored before;
        ProducerFencedError for an epoch older than the newest seen."""
        state = self.states.get(key)
        if state is None or epoch > state.epoch:
            return 0
        if epoch < state.epoch:
            raise ProducerFencedError(
                f"producer {key[0]:#x} sent epoch {epoch} to {key[1]}/{key[2]}, but epoch {state.epoch} of it has "
                "written there since: this producer was replaced by a newer instance and must stop (its epoch "
                "only goes forwards)"
            )
        if seq >= state.next_seq:
            return 0
        return min(count, state.next_seq - seq)

    def stored(self, key: Key, epoch: int, seq: int, count: int, end_offset: int) -> None:
        """Messages ``seq`` .. ``seq + count - 1`` were appended; their record ends at log
        offset ``end_offset``."""
        state = self.states.get(key)
        nxt = seq + count if state is None or epoch > state.epoch else max(state.next_seq, seq + count)
        self.states[key] = new = State(epoch, nxt, time.time(), end_offset)
        self._unflushed.append((key, new))
