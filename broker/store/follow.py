"""A slave's copy of its master's commit log, indexed as whole records arrive.

The master ships its log as plain byte chunks, cut wherever its reads end, and the slave
appends them at the same log offsets, so the two logs stay byte for byte the same (blank
records, gaps and segment boundaries included) and a record's log offset, message id and
queue offset mean the same on every replica. A chunk may end in the middle of a record:
the follower indexes only whole records, each CRC-checked, and picks the rest up when the
next chunk completes it. A damaged record is refused before it is indexed, and the bytes
from it on are taken back, so the slave asks for them again.
"""

from __future__ import annotations

from broker.store.commitlog import CommitLog
from broker.store.consumequeue import ENTRY, ENTRY_SIZE, ConsumeQueue
from broker.store.recovery import QueueRegistry, Redispatcher, tag_hash
from broker.store.scan import ScannedRecord, records_in
from rocketspark.protocol import record


class LogFollower:
    """Appends copied chunks to ``commitlog`` and indexes them into ``registry``'s queues.
    Single writer: the caller holds the store's append lock."""

    def __init__(self, commitlog: CommitLog, registry: QueueRegistry) -> None:
        self.commitlog = commitlog
        self.registry = registry
        self.indexer = Redispatcher(registry, from_log_start=True, every_topic=True)
        self.indexed = commitlog.max_offset  # recovery indexed every whole record before it
        self.records = 0

    def append(self, offset: int, chunk: bytes) -> int:
        """Append a chunk that starts at ``offset`` (this log's end); return the records it
        completed. Raises ``RecordCorrupted`` (and keeps nothing from the damaged record on)."""
        self.commitlog.append_raw(offset, chunk)
        before = self.records
        self.index()
        return self.records - before

    def index(self) -> None:
        while self.indexed < self.commitlog.max_offset:
            segment = self.commitlog.segment_for(self.indexed)
            if segment is None:
                return
            pos = self.indexed - segment.base
            data = segment.read(pos, segment.wrote - pos)
            try:
                found, used, sealed = records_in(data, self.indexed)
            except record.RecordCorrupted:
                self.commitlog.truncate(self.indexed)  # ask for these bytes again
                raise
            self._dispatch(found)
            self.records += len(found)
            self.indexed += used
            if sealed:
                self.indexed = segment.base + segment.size
            elif used == 0:
                return  # a record cut off by the chunk's end: the next chunk completes it

    def _dispatch(self, records: list[ScannedRecord]) -> None:
        """Index records, one write per queue for the runs that extend their queue in order
        (the usual case: a copy of a log that was indexed the same way), the indexer's
        careful path for the rest."""
        runs: dict[tuple[str, int], tuple[ConsumeQueue, bytearray]] = {}
        for rec in records:
            key = (rec.topic, rec.queue_id)
            run = runs.get(key)
            if run is None:
                cq = self.registry.queue(rec.topic, rec.queue_id)
                if cq.max_offset != rec.queue_offset:
                    self.indexer.dispatch(rec, lossy=True)
                    continue
                run = runs[key] = (cq, bytearray())
            cq, entries = run
            if cq.max_offset + len(entries) // ENTRY_SIZE != rec.queue_offset:
                cq.append(bytes(entries))
                del runs[key]
                self.indexer.dispatch(rec, lossy=True)
                continue
            entries += ENTRY.pack(rec.phys, rec.size, tag_hash(rec.tags))
        for cq, entries in runs.values():
            cq.append(bytes(entries))
