"""The store's consume queues: found on disk at start-up, loaded on first use, checked when loaded.

A broker with 10,000 queues must restart in seconds, so start-up only lists the queue
directories; a queue's files are opened the first time something reads or writes it. Being
derived data, a queue is never trusted as it lies on disk: when it is loaded it is compared
with what the last checkpoint said of it (its first and next offset) and its first and last
entries are compared with the records they point to. A missing oldest file, a short file or
a wrong entry make the queue be rebuilt from the commit log, and that is logged.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from broker.store.commitlog import CommitLog
from broker.store.consumequeue import ConsumeQueue, QueueDamaged
from broker.store.entrycheck import first_mismatch
from broker.store.mappedfile import Sync

log = logging.getLogger(__name__)

QueueKey = tuple[str, int]
Bounds = tuple[int, int]  # (min offset, max offset) of a queue, as a checkpoint saw it


class QueueSet:
    """Consume queues by (topic, queue id). Single writer: the broker's event loop."""

    def __init__(
        self,
        root: Path,
        entries_per_file: int,
        commitlog: CommitLog,
        *,
        rebuild: Callable[[QueueKey, int], None],
        sync: Sync = os.fsync,
    ) -> None:
        self.root = root
        self.sync = sync
        self.entries_per_file = entries_per_file
        self.commitlog = commitlog
        self.loaded: dict[QueueKey, ConsumeQueue] = {}
        self.on_disk: set[QueueKey] = set()  # present on disk and not loaded yet
        self.saved: dict[QueueKey, Bounds] = {}  # the checkpoint's view of queues not loaded yet
        # (a queue the checkpoint knows whose directory is gone is rebuilt when first used)
        self.rebuild = rebuild  # index a queue again from the log, its offsets never below the floor

    def scan_disk(self) -> list[QueueKey]:
        """List the queues on disk (directory names only: no file is opened)."""
        keys: list[QueueKey] = []
        if self.root.exists():
            for topic_dir in sorted(self.root.iterdir()):
                for q in sorted(topic_dir.iterdir()) if topic_dir.is_dir() else []:
                    if q.name.isdigit():
                        keys.append((topic_dir.name, int(q.name)))
        self.on_disk = set(keys)
        return keys

    def directory(self, key: QueueKey) -> Path:
        return self.root / key[0] / str(key[1])

    def queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        """The queue to write to: loaded and checked on first use, or created."""
        return self.find(topic, queue_id) or self.raw(topic, queue_id)

    def raw(self, topic: str, queue_id: int) -> ConsumeQueue:
        """The queue as it lies on disk, unchecked, or a new one: recovery's view, which
        repairs queues itself."""
        key = (topic, queue_id)
        cq = self.loaded.get(key)
        return cq if cq is not None else self._open(key)

    def _open(self, key: QueueKey) -> ConsumeQueue:
        cq = ConsumeQueue(self.directory(key), key[0], key[1], self.entries_per_file, sync=self.sync)
        self.on_disk.discard(key)
        try:
            cq.load()
        finally:
            self.loaded[key] = cq
        return cq

    def find(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        """The queue if it exists, loading and checking it on first use; None if it never did."""
        key = (topic, queue_id)
        cq = self.loaded.get(key)
        if cq is None and (key in self.on_disk or key in self.saved):
            cq = self._load_checked(key)
        return cq

    def _load_checked(self, key: QueueKey) -> ConsumeQueue:
        saved = self.saved.pop(key, None)
        try:
            cq = self._open(key)
            cut = cq.truncate_phys(self.commitlog.max_offset)  # entries of a tail a crash tore off
            if cut:
                log.warning("consume queue %s/%d: cut %d entries past the end of the commit log", *key, cut)
            why = self.disagreement(cq, saved)
        except (QueueDamaged, OSError, ValueError) as exc:
            why = f"its files are damaged ({exc})"
        if why is not None:
            floor = max(saved[1] if saved else 0, self.loaded[key].max_offset if key in self.loaded else 0)
            log.warning("consume queue %s/%d %s; rebuilding it from the commit log", key[0], key[1], why)
            self.rebuild(key, floor)
        cq = self.loaded[key]
        cq.delete_expired(self.commitlog.min_offset)
        return cq

    def disagreement(self, cq: ConsumeQueue, saved: Bounds | None) -> str | None:
        """Why ``cq`` cannot be trusted as loaded, or None: its range against the checkpoint,
        its first and last entries against their records."""
        if saved is not None:
            low, high = saved
            if cq.max_offset < high:
                return f"ends at offset {cq.max_offset} but the checkpoint saw it reach {high} (a short file)"
            if cq.min_offset > low:
                return f"starts at offset {cq.min_offset} but the checkpoint saw it start at {low} (a missing file)"
        for slot in {cq.min_slot, cq.max_slot - 1}:
            if cq.min_slot <= slot < cq.max_slot:
                why = self._entry_disagrees(cq, slot)
                if why is not None:
                    return why
        return None

    def _entry_disagrees(self, cq: ConsumeQueue, slot: int) -> str | None:
        entry = cq.entry(slot)
        if entry.size == 0 or entry.phys < self.commitlog.min_offset:
            return None  # a tombstone, or a record retention removed
        where = f"offset {entry.base}"
        data = self.commitlog.read(entry.phys, entry.size)
        if data is None:
            return f"has an entry at {where} pointing past the end of the commit log ({entry.phys})"
        bad = first_mismatch(
            data, cq.topic.encode(), cq.queue_id, [entry.base], [entry.messages], [entry.phys], [entry.size]
        )
        return None if bad is None else f"has an entry at {where} that disagrees with the log: {bad.reason}"

    def drop(self, key: QueueKey) -> None:
        """Delete a queue's files and forget it."""
        cq = self.loaded.pop(key, None)
        self.on_disk.discard(key)
        self.saved.pop(key, None)
        if cq is not None:
            cq.destroy()
        else:
            shutil.rmtree(self.directory(key), ignore_errors=True)

    def drop_topic(self, topic: str) -> None:
        for key in [k for k in (*self.loaded, *self.on_disk) if k[0] == topic]:
            self.drop(key)
        shutil.rmtree(self.root / topic, ignore_errors=True)

    def __getitem__(self, key: QueueKey) -> ConsumeQueue:
        cq = self.find(*key)
        if cq is None:
            raise KeyError(key)
        return cq

    def __iter__(self) -> Iterator[ConsumeQueue]:
        return iter(list(self.loaded.values()))

    def table(self) -> dict[str, list[int]]:
        """Every queue's (min, max) for the checkpoint, including those not loaded since start."""
        table = {f"{t}@{q}": [low, high] for (t, q), (low, high) in self.saved.items()}
        for (t, q), cq in list(self.loaded.items()):
            if cq.max_offset:
                table[f"{t}@{q}"] = [cq.min_offset, cq.max_offset]
        return table


def parse_table(checkpoint: dict[str, object] | None) -> dict[QueueKey, Bounds]:
    """A checkpoint's queue table: ``{"topic@id": [min, max]}`` (older stores saved max only)."""
    out: dict[QueueKey, Bounds] = {}
    table = checkpoint.get("queues", {}) if checkpoint else {}
    if not isinstance(table, dict):
        return out
    for key, value in table.items():
        topic, _, qid = str(key).rpartition("@")
        if not topic or not qid.isdigit():
            continue
        if isinstance(value, int):
            out[(topic, int(qid))] = (0, value)
        elif isinstance(value, list) and len(value) == 2 and all(isinstance(v, int) for v in value):
            out[(topic, int(qid))] = (value[0], value[1])
    return out


@dataclass(frozen=True, slots=True)
class Registry:
    """Recovery's and the follower's view of the queues (a ``QueueRegistry``): raw queues,
    dropped under the store's ``maint_lock``, and ``accepted(topic, phys)``, which records
    belong to a live topic."""

    queues: QueueSet
    accepted: Callable[[str, int], bool]
    maint_lock: threading.Lock

    def queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        """Load (as it lies on disk) or create a queue."""
        return self.queues.raw(topic, queue_id)

    def drop_queue(self, topic: str, queue_id: int) -> None:
        with self.maint_lock:
            self.queues.drop((topic, queue_id))

    def accepts(self, topic: str, phys: int) -> bool:
        return self.accepted(topic, phys)
