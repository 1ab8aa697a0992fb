"""Logical queues over mapping items, and their bounds from the brokers' stats, as pure logic."""

from __future__ import annotations

import pytest

from rocketspark.client.logical import LogicalQueue, Segment, logical_view, topic_queue_ids
from rocketspark.client.pulling import plan_pull
from rocketspark.client.topic_stats import QueueStats, TopicStats, queue_bounds, segment_state
from rocketspark.errors import ConnectError
from rocketspark.protocol.static_mapping import LogicQueueMappingItem, SegmentState
from rocketspark.protocol.types import BrokerData, Perm, QueueData, TopicRouteData


def item(gen: int, broker: str, qid: int, logic: int, end: int = -1) -> LogicQueueMappingItem:
    return LogicQueueMappingItem(gen=gen, queue_id=qid, bname=broker, logic_offset=logic, end_offset=end)


def chain(*addresses: str | None) -> LogicalQueue:
    """Three segments: a [0, 20) sealed, b [10000, 10005) sealed, a from 20000 open."""
    items = (item(0, "a", 0, 0, end=20), item(1, "b", 0, 10_000, end=5), item(2, "a", 1, 20_000))
    return LogicalQueue("t", 0, tuple(Segment(i, a) for i, a in zip(items, addresses, strict=True)), 9, True)


def test_a_segment_answers_with_its_mapping_item() -> None:
    segment = Segment(item(1, "b", 3, 10_000, end=7), "127.0.0.1:2")
    assert (segment.broker_name, segment.queue_id, segment.gen, segment.sealed) == ("b", 3, 1, True)
    assert segment.physical(10_004) == 4 and segment.logical(4) == 10_004 and segment.logical_end == 10_007


def test_segments_are_found_and_followed_along_the_chain() -> None:
    queue = chain("x:1", "x:2", "x:1")
    assert [queue.segment_for(o).gen for o in (0, 19, 9_999, 10_000, 25_000)] == [0, 0, 0, 1, 2]
    assert queue.next_after(queue.segments[0]) is queue.segments[1]
    assert queue.next_after(queue.segments[2]) is None
    assert queue.after_end(queue.segments[0]) == 10_000 and queue.leader is queue.segments[2]


def test_a_broker_missing_from_the_route_is_reported_the_same_way_everywhere() -> None:
    queue = chain("x:1", None, "x:1")
    with pytest.raises(ConnectError, match="broker b, which holds t from logical offset 10000, is not registered"):
        queue.segments[1].require_address("t")
    with pytest.raises(ConnectError, match="broker b"):
        plan_pull(queue, 10_001, 10, timeout_ms=1000)
    assert queue.segments[0].require_address("t") == "x:1"


def test_a_normal_topic_is_one_open_segment_per_queue() -> None:
    route = TopicRouteData(
        "n",
        (BrokerData("C", "b", "x:2"), BrokerData("C", "a", "x:1")),
        (QueueData("b", 1, 1, Perm.READ_WRITE), QueueData("a", 2, 2, Perm.READ_WRITE)),
    )
    view = logical_view(route)
    assert [(q.queue_id, q.segments[0].broker_name, q.segments[0].queue_id) for q in view] == [
        (0, "a", 0),
        (1, "a", 1),
        (2, "b", 0),
    ]
    assert all(q.leader is q.segments[0] and q.segments[0].logic_offset == 0 for q in view)


def test_broker_queue_ids_map_to_the_topics_numbering() -> None:
    route = TopicRouteData(
        "n",
        (BrokerData("C", "b", "x:2"), BrokerData("C", "a", "x:1")),
        (QueueData("b", 2, 2, Perm.READ_WRITE), QueueData("a", 2, 2, Perm.READ_WRITE)),
    )
    assert topic_queue_ids(logical_view(route)) == {("a", 0): 0, ("a", 1): 1, ("b", 0): 2, ("b", 1): 3}
    unreadable = TopicRouteData(route.topic, route.brokers, (QueueData("b", 2, 2, Perm.WRITE), route.queues[1]))
    assert topic_queue_ids(logical_view(unreadable)) == {("a", 0): 0, ("a", 1): 1}  # b has no number now
    # a static topic's brokers carry its logical ids: each maps to itself on each of its brokers
    assert topic_queue_ids([chain("x:1", "x:2", "x:1")]) == {("a", 0): 0, ("b", 0): 0}


def stats(a0: tuple[int, int], b0: tuple[int, int], a1: tuple[int, int]) -> TopicStats:
    return {
        "a": {0: QueueStats(*a0, 0), 1: QueueStats(*a1, 0)},
        "b": {0: QueueStats(*b0, 0)},
    }


@pytest.mark.parametrize(
    ("rows", "bounds"),
    [
        (((0, 20), (0, 5), (0, 3)), (0, 20_003)),  # everything retained
        (((20, 20), (2, 5), (0, 3)), (10_002, 20_003)),  # the first segment expired
        (((20, 20), (5, 5), (4, 9)), (20_004, 20_009)),  # only the open one has data left
    ],
)
def test_queue_bounds_skip_expired_segments(
    rows: tuple[tuple[int, int], tuple[int, int], tuple[int, int]], bounds: tuple[int, int]
) -> None:
    assert queue_bounds(chain("x:1", "x:2", "x:1"), stats(*rows)) == bounds


def test_during_a_remap_the_bounds_end_at_the_last_sealed_segment() -> None:
    items = (item(0, "a", 0, 0, end=20), item(1, "b", 0, 10_000, end=5))
    queue = LogicalQueue("t", 0, tuple(Segment(i, "x:1") for i in items), 9, True)
    assert queue_bounds(queue, stats((20, 20), (5, 5), (0, 0))) == (10_005, 10_005)  # nothing retained
    assert queue_bounds(queue, stats((3, 20), (0, 5), (0, 0))) == (3, 10_005)


def test_segment_states() -> None:
    queue = chain("x:1", "x:2", "x:1")
    sealed, _, open_ = queue.segments
    assert segment_state(sealed, QueueStats(20, 20, 0)) is SegmentState.EXPIRED
    assert segment_state(sealed, QueueStats(19, 20, 0)) is SegmentState.READ_ONLY
    assert segment_state(open_, QueueStats(99, 99, 0)) is SegmentState.NORMAL
