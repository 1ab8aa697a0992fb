"""The source: streaming and batch readers of ``format("rocketmq")``.

One Spark partition per logical queue (more with ``minPartitions``, split at segment
boundaries first). Offsets are logical offsets per logical queue, checkpointed as readable
JSON (``{"orders": {"0": 1200, "1": 1185}}``); the driver plans each range onto the segments
holding it and executors read those segments from their brokers directly.

Facts about the pinned pyspark that shape this code (research/pyspark-datasource-api.md):
``read()`` runs on a pickled copy of the reader made at query start, so everything a task
needs travels in its partition and clients are created lazily; ``commit()`` runs a batch late
and ``stop()`` may never run, so the checkpoint is the only source of truth.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, Filter, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow

from rocketspark.client.logical import SegmentRange, advance, count, plan_ranges
from rocketspark.errors import RocketSparkError
from rocketspark.spark.catalog import Catalog, Offsets, ordered, parse
from rocketspark.spark.data_loss import lost
from rocketspark.spark.executor_imports import Guarded
from rocketspark.spark.options import ReaderOptions
from rocketspark.spark.planning import distribute, split
from rocketspark.spark.pushdown import Pushed, narrow, push, tags_read
from rocketspark.spark.reading import ReadSpec, read_range

log = logging.getLogger(__name__)


class RocketMQPartition(Guarded, InputPartition):
    """One task's work: a slice of one segment of a logical queue, as plain picklable data."""

    def __init__(self, spec: ReadSpec, segment_range: SegmentRange) -> None:
        super().__init__((segment_range.queue.topic, segment_range.queue.queue_id, segment_range.logical_start))
        self.spec = spec
        self.range = segment_range


def _spec(options: ReaderOptions) -> ReadSpec:
    """What executors need of the query's options: ``ReadSpec``'s fields, taken by name."""
    return ReadSpec(**{f.name: getattr(options, f.name) for f in dataclasses.fields(ReadSpec)})


class _Planner:
    """Shared by the streaming and the batch reader: offsets to partitions on the driver, and
    reading a partition on an executor."""

    options: ReaderOptions
    _catalog: Catalog | None = None

    @property
    def catalog(self) -> Catalog:
        if self._catalog is None:
            self._catalog = Catalog(self.options)
        return self._catalog

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_catalog"] = None  # a live client never travels to executors
        return state

    def plan(self, start: Offsets, end: Offsets) -> list[RocketMQPartition]:
        spec = _spec(self.options)
        pieces = self._pieces(sum(len(q) for q in end.values()))
        partitions: list[RocketMQPartition] = []
        for topic in sorted(end):
            state = self.catalog.state(topic)
            for queue_id in sorted(end[topic]):
                queue = state.queues.get(queue_id)
                low = start.get(topic, {}).get(queue_id, 0)  # a queue new to the query starts at 0
                high = end[topic][queue_id]
                if queue is None or high <= low:
                    continue
                low = self._check_loss(topic, queue_id, low, high, state.bounds[queue_id].low)
                partitions += [RocketMQPartition(spec, piece) for piece in split(plan_ranges(queue, low, high), pieces)]
        return partitions

    def _pieces(self, queues: int) -> int:
        """How many pieces each queue is split into, for at least ``minPartitions`` in all."""
        wanted = self.options.min_partitions
        return 1 if not wanted or queues == 0 else max(1, -(-wanted // queues))

    def _check_loss(self, topic: str, queue_id: int, low: int, high: int, earliest: int) -> int:
        """Offsets below the earliest retained one are lost: fail, or skip exactly them."""
        if low >= earliest:
            return low
        lost_to = min(earliest, high)
        why = f"were deleted (by retention) before this query read them; the queue now starts at {earliest}"
        lost(self.options.fail_on_data_loss, topic, queue_id, low, lost_to, why, log)
        return lost_to

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, RocketMQPartition):
            # a batch read with nothing to read: Spark replaces the empty plan by InputPartition(None)
            return iter(())
        return read_range(partition.spec, partition.range)

    def stop(self) -> None:
        if self._catalog is not None:
            self._catalog.close()
            self._catalog = None


class RocketMQStreamReader(Guarded, _Planner, DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: ReaderOptions) -> None:
        self.options = options
        self._catalog = None
        self._available_now: Offsets | None = None
        self._last_batch_at = time.monotonic()
        self._last_end: str | None = None

    def initialOffset(self) -> dict[str, dict[str, int]]:
        return ordered(self.catalog.starting_offsets())

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        """AvailableNow: read up to the latest offsets seen now, in batches that honour limits."""
        self._available_now = self.catalog.latest(fresh=True)

    def latestOffset(self, start: dict[str, dict[str, int]], limit: ReadLimit) -> dict[str, dict[str, int]]:
        begin = parse(start)
        # One state per topic for this whole decision: its queues and latest offsets agree.
        states = {t: self.catalog.state(t) for t in (self._available_now or self.catalog.topics())}
        latest = self._available_now or {t: state.latest for t, state in states.items()}
        target: Offsets = {}
        backlog: dict[tuple[str, int], int] = {}
        for topic, queues in latest.items():
            target[topic] = {}
            for q, high in queues.items():
                low = begin.get(topic, {}).get(q, 0)
                target[topic][q] = max(high, low)
                backlog[(topic, q)] = count(states[topic].queues[q], low, target[topic][q])
        total = sum(backlog.values())
        if total and self._too_early(total):
            return start
        if isinstance(limit, ReadMaxRows):
            for (topic, q), share in distribute(backlog, limit.max_rows).items():
                low = begin.get(topic, {}).get(q, 0)
                target[topic][q] = advance(states[topic].queues[q], low, target[topic][q], share)  # >= low
        end = ordered(target)
        if str(end) != self._last_end:
            self._last_end = str(end)
            self._last_batch_at = time.monotonic()
        return end

    def _too_early(self, available: int) -> bool:
        """minOffsetsPerTrigger: wait for more, but never longer than maxTriggerDelay."""
        wanted = self.options.min_offsets_per_trigger
        if not wanted or available >= wanted or self._available_now is not None:
            return False
        return time.monotonic() - self._last_batch_at < self.options.max_trigger_delay_ms / 1000

    def reportLatestOffset(self) -> dict[str, dict[str, int]] | None:
        """Shown as ``latestOffset`` in the query's progress; ``metrics.offsets_behind_latest``
        turns it into a backlog."""
        try:
            return ordered(self.catalog.latest())
        except RocketSparkError:
            return None

    def partitions(self, start: dict[str, dict[str, int]], end: dict[str, dict[str, int]]) -> list[RocketMQPartition]:
        return self.plan(parse(start), parse(end))

    def commit(self, end: dict[str, dict[str, int]]) -> None:
        """Optionally record progress in a consumer group, for lag dashboards only: the
        checkpoint decides where a restarted query resumes, never the group."""
        group = self.options.consumer_group
        if not group:
            return
        for topic, queues in parse(end).items():
            for q, offset in queues.items():
                try:
                    self.catalog.consumer.commit_offset(group, topic, q, offset)
                except RocketSparkError as exc:
                    log.warning("could not commit %s/%s=%s to group %s: %s", topic, q, offset, group, exc)


class RocketMQBatchReader(Guarded, _Planner, DataSourceReader):
    """``spark.read``: from startingOffsets (default earliest) to endingOffsets (default latest),
    cut to what the filters Spark pushed keep (:class:`RocketMQFilteringReader`)."""

    pushed = Pushed()  # nothing pushed: every queue, whole

    def __init__(self, options: ReaderOptions) -> None:
        self.options = options
        self._catalog = None

    def partitions(self) -> list[RocketMQPartition]:
        if self.pushed.nothing:
            return []
        start = self.catalog.starting_offsets()
        end = self.catalog.ending_offsets()
        for topic, queues in end.items():
            for q, high in queues.items():
                low = start.get(topic, {}).get(q, 0)
                if high < low:
                    raise RocketSparkError(
                        f"endingOffsets {high} of {topic} queue {q} is before its startingOffsets {low}"
                    )
        try:
            if self.pushed != Pushed():
                start, end = narrow(start, end, self.pushed, self.catalog.consumer.offset_for_timestamp)
            return self.plan(start, end)
        finally:
            self.stop()


class RocketMQFilteringReader(RocketMQBatchReader):
    """The batch reader Spark pushes filters into: made only where Spark calls ``pushFilters``
    (``pushdown.spark_pushes_filters``), because a reader that merely defines it makes Spark
    refuse filtered reads while ``spark.sql.python.filterPushdown.enabled`` is false."""

    def pushFilters(self, filters: list[Filter]) -> list[Filter]:
        """Take the filters that narrow the plan (:mod:`rocketspark.spark.pushdown`); hand back
        those Spark must still apply."""
        pushed, back = push(filters, tags_allowed=self.options.sql is None)
        tags = tags_read(pushed, self.options.tags)
        self.pushed = dataclasses.replace(pushed, tags=tags)
        if tags:
            self.options = dataclasses.replace(self.options, tags=tuple(sorted(tags)))
        return back
