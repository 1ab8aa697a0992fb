"""Consumer offsets per (group, topic, queue), kept by the broker and persisted.

Like RocketMQ's ``ConsumerOffsetManager``: held in memory as ``"topic@group" -> {queueId:
offset}`` and written to ``<data_dir>/config/consumerOffset.json`` every
``offset_flush_interval_ms`` when something changed, and at shutdown.
"""

from __future__ import annotations

from pathlib import Path

from broker.store.metafile import read_json, write_json_atomic


class ConsumerOffsets:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.table: dict[str, dict[int, int]] = {}
        self.dirty = False

    def load(self) -> None:
        data = read_json(self.path, default={"offsets": {}})
        self.table = {key: {int(q): int(o) for q, o in queues.items()} for key, queues in data["offsets"].items()}

    def persist(self) -> None:
        if not self.dirty:
            return
        self.dirty = False
        write_json_atomic(self.path, {"offsets": {k: {str(q): o for q, o in v.items()} for k, v in self.table.items()}})

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        queues = self.table.setdefault(f"{topic}@{group}", {})
        if queues.get(queue_id) != offset:
            queues[queue_id] = offset
            self.dirty = True

    def query(self, group: str, topic: str, queue_id: int) -> int | None:
        return self.table.get(f"{topic}@{group}", {}).get(queue_id)

    def groups_of(self, topic: str) -> list[str]:
        return sorted(key.rpartition("@")[2] for key in self.table if key.rpartition("@")[0] == topic)

    def drop_topic(self, topic: str) -> None:
        for key in [k for k in self.table if k.rpartition("@")[0] == topic]:
            del self.table[key]
            self.dirty = True
