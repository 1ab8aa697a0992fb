"""A slave's copy of its master's commit log, indexed as whole records arrive.

The master ships its log as plain byte chunks, cut wherever its reads end, and the slave
appends them at the same log offsets, so the two logs stay byte for byte the same (blank
records, gaps and segment boundaries included) and a record's log offset, message id and
queue offset mean the same on every replica. A chunk may end in the middle of a record:
the follower indexes only whole records, each checked for shape and place, and picks the
rest up when the next chunk completes it. A damaged record is refused before it is indexed,
and the bytes from it on are taken back, so the slave asks for them again. Appending and
indexing are separate steps: a slave indexes the pieces it received in one pass, after
acknowledging them.
"""

from __future__ import annotations

from broker.store.chunkscan import QueueRun, scan_chunk
from broker.store.commitlog import CommitLog
from broker.store.recovery import QueueRegistry, Redispatcher
from broker.store.scan import parse_record
from rocketspark.codec.layout import RecordCorrupted

WINDOW_BYTES = 1 << 20  # indexed in one pass at most: numpy's temporaries stay small


class LogFollower:
    """Appends copied chunks to ``commitlog`` and indexes them into ``registry``'s queues.
    Single writer: the caller holds the store's append lock."""

    def __init__(self, commitlog: CommitLog, registry: QueueRegistry) -> None:
        self.commitlog = commitlog
        self.registry = registry
        self.indexer = Redispatcher(registry, from_log_start=True, every_topic=True)
        self.indexed = commitlog.max_offset  # recovery indexed every whole record before it
        self.records = 0

    def append(self, offset: int, chunk: bytes) -> None:
        """Append a chunk that starts at ``offset`` (this log's end); ``index`` makes its
        records readable. Copying and indexing are apart so that a slave acknowledges a piece
        as soon as it holds it and indexes many pieces at once."""
        self.commitlog.append_raw(offset, chunk)

    def index(self) -> int:
        """Index every whole record appended so far; return how many. Raises
        ``RecordCorrupted`` (and keeps nothing from the damaged record on)."""
        before = self.records
        self._index()
        return self.records - before

    def _index(self) -> None:
        # An empty replica's copy starts at the master's first segment, not at 0.
        self.indexed = max(self.indexed, self.commitlog.min_offset)
        while self.indexed < self.commitlog.max_offset:
            segment = self.commitlog.segment_for(self.indexed)
            if segment is None:
                return
            pos = self.indexed - segment.base
            left = segment.wrote - pos
            data = segment.read(pos, min(left, WINDOW_BYTES))
            try:
                scan = scan_chunk(data, self.indexed, segment.size - pos)
                if scan.used == 0 and not scan.sealed and len(data) < left:  # one record larger than the window
                    data = segment.read(pos, left)
                    scan = scan_chunk(data, self.indexed, segment.size - pos)
            except RecordCorrupted as exc:
                self._index_before(data, exc.position)
                self.commitlog.truncate(self.indexed)  # ask for the damaged record on again
                raise
            for run in scan.runs:
                self._dispatch(run, data)
            self.records += scan.records
            self.indexed += scan.used
            if scan.sealed:
                self.indexed = segment.base + segment.size
            elif scan.used == 0:
                return  # a record cut off by the chunk's end: the next chunk completes it

    def _index_before(self, data: bytes, damaged_at: int) -> None:
        """Index the whole records in front of a damaged one (they are good)."""
        scan = scan_chunk(data[:damaged_at], self.indexed, damaged_at)
        for run in scan.runs:
            self._dispatch(run, data)
        self.records += scan.records
        self.indexed += scan.used

    def _dispatch(self, run: QueueRun, data: bytes) -> None:
        """Index one queue's records: one write when they extend the queue in order (the
        usual case: a copy of a log that was indexed the same way), the indexer's careful
        path record by record otherwise."""
        cq = self.registry.queue(run.topic, run.queue_id)
        if cq.max_offset == int(run.queue_offsets[0]) and run.contiguous:
            cq.append(run.entries(), run.end_offset)
            return
        for phys in run.phys.tolist():
            self.indexer.dispatch(parse_record(data, phys - self.indexed, self.indexed), lossy=True)
