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
from broker.store.recovery import QueueRegistry, Redispatcher
from broker.store.scan import records_in
from rocketspark.protocol import record


class LogFollower:
    """Appends copied chunks to ``commitlog`` and indexes them into ``registry``'s queues.
    Single writer: the caller holds the store's append lock."""

    def __init__(self, commitlog: CommitLog, registry: QueueRegistry) -> None:
        self.commitlog = commitlog
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
            for rec in found:
                self.indexer.dispatch(rec, lossy=True)
            self.records += len(found)
            self.indexed += used
            if sealed:
                self.indexed = segment.base + segment.size
            elif used == 0:
                return  # a record cut off by the chunk's end: the next chunk completes it
