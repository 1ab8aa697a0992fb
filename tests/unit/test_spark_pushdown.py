"""Which of Spark's filters the batch reader takes, what they keep, and how a plan is cut
(pure logic; the reads themselves are tested on a real cluster in tests/spark/test_pushdown.py)."""

from __future__ import annotations

import datetime
import os

from pyspark.sql.datasource import (
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringStartsWith,
)

from rocketspark.spark.pushdown import (
    PUSHDOWN_WORKER,
    STORE_TIME_SLACK_MS,
    Interval,
    Pushed,
    narrow,
    push,
    spark_pushes_filters,
    tags_read,
)

UTC = datetime.UTC


def test_queue_and_offset_comparisons_are_taken_exactly() -> None:
    filters = [In(("queueId",), [1, 3, 5]), GreaterThan(("queueId",), 1), LessThanOrEqual(("queueOffset",), 99)]
    pushed, back = push(filters, tags_allowed=True)
    assert back == []
    assert pushed.queue_ids == {1, 3, 5} and pushed.queue_range == Interval(2, None)
    assert pushed.offsets == Interval(None, 100)
    assert [q for q in range(8) if pushed.keeps("t", q)] == [3, 5]


def test_equal_filters_meet() -> None:
    pushed, back = push([EqualTo(("queueId",), 1), EqualTo(("queueId",), 2)], tags_allowed=True)
    assert back == [] and pushed.nothing


def test_an_offset_in_list_only_bounds_the_range_and_is_handed_back() -> None:
    listed = In(("queueOffset",), [7, 3, 20])
    pushed, back = push([listed], tags_allowed=True)
    assert back == [listed] and pushed.offsets == Interval(3, 21)


def test_tags_are_taken_unless_the_sql_option_filters_the_pulls() -> None:
    tag = In(("tag",), ["A", "B"])
    not_null = IsNotNull(("tag",))
    pushed, back = push([not_null, tag], tags_allowed=True)
    assert back == [] and pushed.tags == {"A", "B"}
    pushed, back = push([not_null, tag], tags_allowed=False)
    assert back == [not_null, tag] and pushed.tags is None


def test_a_star_or_empty_tag_is_not_a_tag_filter() -> None:
    for value in ("*", ""):
        f = EqualTo(("tag",), value)
        assert push([f], tags_allowed=True) == (Pushed(), [f])


def test_store_time_narrows_in_whole_ms_and_is_handed_back() -> None:
    at = datetime.datetime(2026, 1, 1, 0, 0, 0, 1500, tzinfo=UTC)  # 1.5 ms past a whole second
    ms = int(datetime.datetime(2026, 1, 1, tzinfo=UTC).timestamp() * 1000)
    cases = {
        GreaterThanOrEqual: Interval(ms + 2, None),
        GreaterThan: Interval(ms + 2, None),
        LessThan: Interval(None, ms + 2),
        LessThanOrEqual: Interval(None, ms + 2),
        EqualTo: Interval(ms + 2, ms + 2),
    }
    for kind, wanted in cases.items():
        f = kind(("storeTimestamp",), at)
        pushed, back = push([f], tags_allowed=True)
        assert (pushed.store_ms, back) == (wanted, [f]), kind
    whole = datetime.datetime(2026, 1, 1, tzinfo=UTC)
    assert push([GreaterThan(("storeTimestamp",), whole)], tags_allowed=True)[0].store_ms == Interval(ms + 1, None)
    assert push([LessThanOrEqual(("storeTimestamp",), whole)], tags_allowed=True)[0].store_ms == Interval(None, ms + 1)


def test_what_cannot_be_pushed_is_handed_back_untouched() -> None:
    filters = [
        GreaterThan(("bornTimestamp",), datetime.datetime(2026, 1, 1, tzinfo=UTC)),
        Not(EqualTo(("queueId",), 1)),
        IsNull(("tag",)),
        StringStartsWith(("tag",), "A"),
        EqualTo(("queueId",), "1"),
        EqualTo(("queueId",), True),
        EqualTo(("body",), b"x"),
        EqualTo(("properties", "k"), "v"),
    ]
    assert push(filters, tags_allowed=True) == (Pushed(), filters)


def test_spark_s_not_null_beside_a_comparison_is_taken() -> None:
    pushed, back = push([IsNotNull(("queueId",)), IsNotNull(("msgId",))], tags_allowed=True)
    assert pushed == Pushed() and back == [IsNotNull(("msgId",))]


def test_narrow_cuts_ranges_and_searches_store_times_with_the_slack() -> None:
    searched: list[tuple[str, int, int]] = []

    def offset_at(topic: str, queue: int, ms: int) -> int:
        searched.append((topic, queue, ms))
        return 40 if ms < 5000 else 70

    pushed = Pushed(queue_ids=frozenset({0, 1, 2}), offsets=Interval(10, None), store_ms=Interval(3000, 6000))
    start = {"t": {0: 0, 1: 50, 2: 0, 3: 0}}
    end = {"t": {0: 100, 1: 60, 2: 5, 3: 100}}
    low, high = narrow(start, end, pushed, offset_at)
    assert low == {"t": {0: 40, 1: 50, 2: 10}}
    assert high == {"t": {0: 70, 1: 60, 2: 10}}  # queue 3 ruled out, queue 2 empty, queue 1 above 40
    slack = STORE_TIME_SLACK_MS
    assert searched == [("t", 0, 3000 - slack), ("t", 0, 6000 + slack), ("t", 1, 3000 - slack), ("t", 1, 6000 + slack)]


def test_pushed_tags_within_the_tags_option() -> None:
    assert tags_read(Pushed(), None) is None
    assert tags_read(Pushed(), ("A",)) == {"A"}
    assert tags_read(Pushed(tags=frozenset({"A", "B"})), ("B", "C")) == {"B"}
    assert tags_read(Pushed(tags=frozenset({"A"})), None) == {"A"}


def test_the_filtering_reader_is_offered_only_to_spark_s_pushdown_worker() -> None:
    assert not spark_pushes_filters()
    worker = os.path.join("/site-packages", PUSHDOWN_WORKER)
    scope: dict[str, object] = {"ask": spark_pushes_filters}
    exec(compile("def _main():\n    return ask()\n", worker, "exec"), scope)
    assert scope["_main"]() is True  # type: ignore[operator]


def test_topic_filters_rule_out_the_other_topics_of_a_pattern() -> None:
    pushed, back = push([In(("topic",), ["a", "b"]), EqualTo(("topic",), "b")], tags_allowed=True)
    assert back == [] and pushed.topics == {"b"}
    assert pushed.keeps("b", 3) and not pushed.keeps("a", 3)
    low, high = narrow({"a": {0: 0}, "b": {0: 5}}, {"a": {0: 9}, "b": {0: 9}}, pushed, lambda t, q, ms: 0)
    assert (low, high) == ({"b": {0: 5}}, {"b": {0: 9}})
