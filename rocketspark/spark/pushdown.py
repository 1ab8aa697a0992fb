"""Batch filter pushdown: which of Spark's filters narrow the read plan, and which Spark applies.

Spark (4.1+, with ``spark.sql.python.filterPushdown.enabled``) offers a batch read the filters
of its ``where`` that compare one column with literals, ANDed. Those on the columns the plan is
made of are taken here, so a filtered read pulls only what it needs:

- ``topic`` and ``queueId`` (=, IN, ranges): queues the filter rules out are not read. Exact.
- ``queueOffset`` (=, ranges): each queue's planned range is cut to them. Exact; an IN list
  only bounds the range (its lowest to its highest offset), and Spark applies it.
- ``tag`` (=, IN): the brokers' tag filter on pull (batches whose tag summary cannot match are
  not served) and the reader's exact per-message check. Exact, except with the ``sql`` option
  (a pull filters by tags or by SQL92, not both): then Spark applies it.
- ``storeTimestamp`` (=, ranges): turned into offsets by each queue's search by store time.
  Only narrows: store times within a queue are stamped before the append lock and by the wall
  clock, so they are in offset order only to within a little; the search is widened by
  ``STORE_TIME_SLACK_MS`` each side and Spark applies the filter to what is read.
- ``bornTimestamp``: not indexed, and the producer's clock bounds nothing about the store time
  (a delay message is stored when due, a producer's clock may run ahead): Spark applies it, and
  nothing is narrowed.

``IS NOT NULL`` on a column the reader never leaves null (Spark adds it beside a comparison) is
taken as exact, as is ``tag IS NOT NULL`` beside a tag filter taken. Everything else (OR, NOT,
other columns, other comparisons) is handed back to Spark.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    LessThan,
    LessThanOrEqual,
)

Offsets = dict[str, dict[int, int]]  # topic -> logical queue id -> logical offset (catalog.Offsets)
OffsetAt = Callable[[str, int, int], int]  # (topic, queue, store time ms) -> first offset stored at or after

NEVER_NULL = frozenset({"topic", "queueId", "queueOffset", "bornTimestamp", "storeTimestamp"})
STORE_TIME_SLACK_MS = 1_000  # how far out of offset order a queue's store times may be (see above)
PUSHDOWN_WORKER = os.path.join("pyspark", "sql", "worker", "data_source_pushdown_filters.py")
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


@dataclass(frozen=True, slots=True)
class Interval:
    """Integers in ``[low, high)``; None is unbounded."""

    low: int | None = None
    high: int | None = None

    def meet(self, low: int | None = None, high: int | None = None) -> Interval:
        return Interval(
            low if self.low is None else self.low if low is None else max(self.low, low),
            high if self.high is None else self.high if high is None else min(self.high, high),
        )

    @property
    def empty(self) -> bool:
        return self.low is not None and self.high is not None and self.high <= self.low

    def __contains__(self, value: int) -> bool:
        return (self.low is None or value >= self.low) and (self.high is None or value < self.high)


@dataclass(frozen=True, slots=True)
class Pushed:
    """What the pushed filters keep: plain data, picklable with the reader."""

    topics: frozenset[str] | None = None
    queue_ids: frozenset[int] | None = None
    queue_range: Interval = Interval()
    offsets: Interval = Interval()
    store_ms: Interval = Interval()  # store times, in ms (widened by the slack when searched)
    tags: frozenset[str] | None = None

    @property
    def nothing(self) -> bool:
        """Whether the filters rule out every message (e.g. ``queueId = 1 AND queueId = 2``)."""
        return (
            self.topics == frozenset()
            or self.queue_ids == frozenset()
            or self.tags == frozenset()
            or any(i.empty for i in (self.queue_range, self.offsets, self.store_ms))
        )

    def keeps(self, topic: str, queue_id: int) -> bool:
        return (
            (self.topics is None or topic in self.topics)
            and (self.queue_ids is None or queue_id in self.queue_ids)
            and queue_id in self.queue_range
        )


def spark_pushes_filters() -> bool:
    """Whether Spark's filter-pushdown planning is asking for the reader (its worker then calls
    ``pushFilters``). Spark refuses a batch read whose reader defines ``pushFilters`` while
    ``spark.sql.python.filterPushdown.enabled`` is false (DATA_SOURCE_PUSHDOWN_DISABLED), and a
    Python reader is never told the setting; but with it on, and only then, the reader is made
    by the pushdown worker. So the reader offering ``pushFilters`` is made only there, and a
    session with default settings reads unfiltered (Spark filters the rows)."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_filename.endswith(PUSHDOWN_WORKER):
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


def push(filters: Sequence[Filter], *, tags_allowed: bool) -> tuple[Pushed, list[Filter]]:
    """What ``filters`` (ANDed) keep, and those Spark must still apply: the ones not taken, and
    the ones taken that only narrow the read (see the module's docstring)."""
    pushed = Pushed()
    back: list[Filter] = []
    for f in filters:
        taken = _take(pushed, f, tags_allowed)
        if taken is None:
            back.append(f)
            continue
        pushed, exact = taken
        if not exact:
            back.append(f)
    if pushed.tags is not None:  # Spark's own "tag IS NOT NULL" beside a tag filter pushed
        back = [f for f in back if not (isinstance(f, IsNotNull) and f.attribute == ("tag",))]
    return pushed, back


def _take(pushed: Pushed, f: Filter, tags_allowed: bool) -> tuple[Pushed, bool] | None:
    """``pushed`` narrowed by ``f`` and whether ``f`` is then exact, or None if ``f`` is not taken."""
    attribute: tuple[str, ...] = getattr(f, "attribute", ())  # every Filter class has one; the base names none
    if len(attribute) != 1:
        return None
    column = attribute[0]
    if isinstance(f, IsNotNull) and column in NEVER_NULL:
        return pushed, True  # Spark adds these beside a comparison; the reader never yields a null there
    if not isinstance(f, _COMPARISONS):
        return None
    if isinstance(f, EqualNullSafe) and f.value is None:
        return None
    if column in ("topic", "tag"):
        names = _strings(f)
        if names is None or (column == "tag" and not tags_allowed):
            return None
        if column == "topic":
            return dataclasses.replace(pushed, topics=_meet(pushed.topics, names)), True
        return dataclasses.replace(pushed, tags=_meet(pushed.tags, names)), True
    if column == "queueId":
        return _take_queue(pushed, f)
    if column == "queueOffset":
        bounds = _int_bounds(f)
        if bounds is None:
            return None
        return dataclasses.replace(pushed, offsets=pushed.offsets.meet(*bounds)), not isinstance(f, In)
    if column == "storeTimestamp":
        ms = _ms_bounds(f)
        return None if ms is None else (dataclasses.replace(pushed, store_ms=pushed.store_ms.meet(*ms)), False)
    return None


T = TypeVar("T")
_COMPARISONS = (EqualTo, EqualNullSafe, In, GreaterThan, GreaterThanOrEqual, LessThan, LessThanOrEqual)


def _meet(current: frozenset[T] | None, names: frozenset[T]) -> frozenset[T]:
    """What both keep (None: nothing pushed yet, so all of ``names``)."""
    return names if current is None else current & names


def _strings(f: Filter) -> frozenset[str] | None:
    """The names an = or IN on a string column keeps (not ``*`` or empty: no tag filter means those)."""
    values = _listed(f)
    names = [v for v in values or () if isinstance(v, str) and v and v != "*"]
    if values is None or len(names) != len(values):
        return None
    return frozenset(names)


def _listed(f: Filter) -> list[object] | None:
    if isinstance(f, (EqualTo, EqualNullSafe)):
        return [f.value]
    if isinstance(f, In):
        return list(f.value)
    return None


def _take_queue(pushed: Pushed, f: Filter) -> tuple[Pushed, bool] | None:
    values = _listed(f)
    if values is not None:
        if not all(_is_int(v) for v in values):
            return None
        ids = frozenset(int(v) for v in values)  # type: ignore[call-overload]
        return dataclasses.replace(pushed, queue_ids=_meet(pushed.queue_ids, ids)), True
    bounds = _int_bounds(f)
    if bounds is None:
        return None
    return dataclasses.replace(pushed, queue_range=pushed.queue_range.meet(*bounds)), True


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _int_bounds(f: Filter) -> tuple[int | None, int | None] | None:
    """``[low, high)`` of an integer comparison (of an IN list: its lowest to its highest)."""
    values = _listed(f)
    if values is not None:
        if not values or not all(_is_int(v) for v in values):
            return None
        ints = [int(v) for v in values]  # type: ignore[call-overload]
        return min(ints), max(ints) + 1
    value = getattr(f, "value", None)
    if not _is_int(value):
        return None
    assert isinstance(value, int)
    return _bounds(f, value, value + 1)


def _bounds(f: Filter, after: int, past: int) -> tuple[int | None, int | None] | None:
    """A comparison's ``[low, high)``, given the first value not below its literal (``after``)
    and the first above it (``past``): for an integer, the literal and the next one; for a
    timestamp, the whole ms it falls in or just after (Spark's are in microseconds)."""
    if isinstance(f, GreaterThanOrEqual):
        return after, None
    if isinstance(f, GreaterThan):
        return past, None
    if isinstance(f, LessThan):
        return None, after
    if isinstance(f, LessThanOrEqual):
        return None, past
    if isinstance(f, (EqualTo, EqualNullSafe)):
        return after, past
    return None


def _ms_bounds(f: Filter) -> tuple[int | None, int | None] | None:
    """The store times (whole ms) a comparison on the timestamp column keeps, as ``[low, high)``."""
    value = getattr(f, "value", None)
    if isinstance(f, In) or not isinstance(value, datetime.datetime) or value.tzinfo is None:
        return None
    delta = value - _EPOCH
    micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    first_at_or_after = math.ceil(micros / 1000)  # the first whole ms not before the literal
    first_after = micros // 1000 + 1  # the first whole ms after it
    return _bounds(f, first_at_or_after, first_after)


def narrow(start: Offsets, end: Offsets, pushed: Pushed, offset_at: OffsetAt) -> tuple[Offsets, Offsets]:
    """The planned ``[start, end)`` of every queue cut to what ``pushed`` keeps: queues it rules
    out are left out, offsets and store times cut each range (store times searched with the
    slack, only for a range not already empty)."""
    low_of: Offsets = {}
    high_of: Offsets = {}
    for topic, queues in end.items():
        for q, high in queues.items():
            if not pushed.keeps(topic, q):
                continue
            low = max(start.get(topic, {}).get(q, 0), pushed.offsets.low or 0)
            high = min(high, pushed.offsets.high if pushed.offsets.high is not None else high)
            times = pushed.store_ms
            if high > low and times.low is not None:
                low = max(low, offset_at(topic, q, max(0, times.low - STORE_TIME_SLACK_MS)))
            if high > low and times.high is not None:
                high = min(high, offset_at(topic, q, times.high + STORE_TIME_SLACK_MS))
            low_of.setdefault(topic, {})[q] = low
            high_of.setdefault(topic, {})[q] = max(low, high)
    return low_of, high_of


def tags_read(pushed: Pushed, option: Iterable[str] | None) -> frozenset[str] | None:
    """The tags a read asks the brokers for: the pushed ones within the ``tags`` option's."""
    if pushed.tags is None:
        return None if option is None else frozenset(option)
    return pushed.tags if option is None else pushed.tags & frozenset(option)
