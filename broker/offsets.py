"""Consumer offsets per (group, topic, queue), kept by the broker and persisted.

Like RocketMQ's ``ConsumerOffsetManager``: held in memory as ``"topic@group" -> {queueId:
offset}`` and written to ``<data_dir>/config/consumerOffset.json`` every
``offset_flush_interval_ms`` when something changed, and at shutdown.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from broker.metadata import OffsetsFile
from broker.store.metafile import SnapshotFile, read_json
from rocketspark.protocol.group_topics import progress_key, split_progress_key


class ConsumerOffsets:
    def __init__(self, path: Path) -> None:
        self.file = SnapshotFile(path)
        self.table: dict[str, dict[int, int]] = {}

    def load(self) -> None:
        data = read_json(self.file.path, default={"offsets": {}}, shape=OffsetsFile)
        self.table = {key: {int(q): int(o) for q, o in queues.items()} for key, queues in data["offsets"].items()}

    def snapshot(self) -> dict[str, Any]:
        return {"offsets": {k: {str(q): o for q, o in v.items()} for k, v in self.table.items()}}

    async def save(self) -> None:
        """Periodic save: snapshot on the event loop, write in a thread."""
        if self.file.dirty:
            await asyncio.to_thread(self.file.write, self.snapshot(), self.file.version)

    def persist(self) -> None:
        """Save now (shutdown)."""
        if self.file.dirty:
            self.file.write(self.snapshot(), self.file.version)

    def adopt(self, snapshot: dict[str, Any]) -> None:
        """Take the master's offsets as they are (a slave)."""
        table = {key: {int(q): int(o) for q, o in queues.items()} for key, queues in snapshot["offsets"].items()}
        if table != self.table:
            self.table = table
            self.file.changed()

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        queues = self.table.setdefault(progress_key(topic, group), {})
        if queues.get(queue_id) != offset:
            queues[queue_id] = offset
            self.file.changed()

    def query(self, group: str, topic: str, queue_id: int) -> int | None:
        return self.table.get(progress_key(topic, group), {}).get(queue_id)

    def progress(self) -> Iterator[tuple[str, str, dict[int, int]]]:
        """Each (topic, group, {queue: offset}) kept here: a copy of the keys, so a commit
        made meanwhile (on the event loop, while a scrape reads this in its thread) is safe."""
        for key, queues in list(self.table.items()):
            topic, group = split_progress_key(key)
            yield topic, group, queues

    def groups(self) -> set[str]:
        """The groups with a committed offset here."""
        return {split_progress_key(key)[1] for key in list(self.table)}

    def drop_topic(self, topic: str) -> None:
        for key in [k for k in self.table if split_progress_key(k)[0] == topic]:
            del self.table[key]
            self.file.changed()
