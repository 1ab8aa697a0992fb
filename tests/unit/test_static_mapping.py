"""Static-topic mapping rules (RocketMQ 5.x's formulas) and the admin's planning, as pure logic."""

from __future__ import annotations

import pytest

from rocketspark.client import static_plan
from rocketspark.client.logical import LogicalQueue, Segment
from rocketspark.client.pulling import PullPlan, finish_pull, plan_pull
from rocketspark.protocol.codes import ResponseCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.static_mapping import (
    LogicQueueMappingItem,
    TopicQueueMappingDetail,
    block_seq_round_up,
    check_items,
    find_item,
    merge_details,
)
from rocketspark.protocol.types import PullStatus


def item(gen: int, broker: str, qid: int, logic: int, end: int = -1) -> LogicQueueMappingItem:
    return LogicQueueMappingItem(gen=gen, queue_id=qid, bname=broker, logic_offset=logic, end_offset=end)


@pytest.mark.parametrize(("offset", "expected"), [(0, 10_000), (4_999, 10_000), (5_000, 20_000), (12_345, 20_000)])
def test_block_seq_round_up_leaves_at_least_half_a_block(offset: int, expected: int) -> None:
    assert block_seq_round_up(offset) == expected


def test_offset_formulas_translate_both_ways() -> None:
    segment = item(1, "b", 3, 10_000)
    assert segment.physical(10_007) == 7 and segment.logical(7) == 10_007 and segment.offset_delta == 10_000


def test_find_item_takes_the_last_segment_starting_at_or_before_the_offset() -> None:
    items = [item(0, "a", 0, 0, end=20), item(1, "b", 0, 10_000, end=5), item(2, "a", 1, 20_000)]
    assert find_item(items, 5).gen == 0
    assert find_item(items, 9_999).gen == 0  # in the gap: the caller moves on at the sealed end
    assert find_item(items, 10_001).gen == 1
    assert find_item(items, 25_000).gen == 2


def test_check_items_rejects_overlaps_and_open_middles() -> None:
    check_items(0, [item(0, "a", 0, 0, end=20), item(1, "b", 0, 10_000)])
    with pytest.raises(ValueError, match="only the newest"):
        check_items(0, [item(0, "a", 0, 0), item(1, "b", 0, 10_000)])
    with pytest.raises(ValueError, match="starts inside"):
        check_items(0, [item(0, "a", 0, 0, end=20), item(1, "b", 0, 10)])
    with pytest.raises(ValueError, match="does not follow"):
        check_items(0, [item(1, "a", 0, 0, end=20), item(1, "b", 0, 10_000)])


def test_the_route_takes_each_queue_from_its_leader_with_the_highest_epoch() -> None:
    history = [item(0, "a", 0, 0, end=20), item(1, "b", 0, 10_000)]
    old_a = TopicQueueMappingDetail("t", 2, "a", 1000, hosted_queues={0: [item(0, "a", 0, 0)], 1: [item(0, "a", 1, 0)]})
    new_a = TopicQueueMappingDetail("t", 2, "a", 2000, hosted_queues={0: history, 1: [item(0, "a", 1, 0)]})
    new_b = TopicQueueMappingDetail("t", 2, "b", 2000, hosted_queues={0: history})
    mapping = merge_details("t", [old_a, new_b])
    assert mapping is not None and mapping.queues[0] == history and mapping.epoch == 2000
    mapping = merge_details("t", [new_a, new_b])
    assert mapping is not None and mapping.queues[1] == [item(0, "a", 1, 0)] and mapping.total_queues == 2


def test_create_spreads_queues_evenly_and_remap_opens_a_fresh_physical_queue() -> None:
    queues = static_plan.add_queues({}, 5, ["a", "b"], {})
    assert [q[-1].bname for q in queues.values()] == ["a", "b", "a", "b", "a"]
    assert [q[-1].queue_id for q in queues.values()] == [0, 0, 1, 1, 2]
    next_ids = static_plan.next_queue_ids([], queues)
    moved = static_plan.move_queues(queues, {0: "b"}, {0: 1234}, next_ids)
    assert moved[0][1] == item(1, "b", 2, 10_000)  # block_seq_round_up(1234); b's queues 0 and 1 are taken
    assert moved[0][0].end_offset == 1234 and moved[0][0].gen == 0


def test_details_give_each_broker_the_history_of_every_queue_it_holds() -> None:
    queues = {0: [item(0, "a", 0, 0, end=3), item(1, "b", 1, 10_000)], 1: [item(0, "b", 0, 0)]}
    details = static_plan.details_for("t", 2, 5000, queues, ["a", "b", "c"])
    assert set(details["a"].hosted_queues) == {0} and set(details["b"].hosted_queues) == {0, 1}
    assert details["c"].hosted_queues == {} and details["a"].leader_of(0) is None
    assert details["b"].curr_id_map == {0: 1, 1: 0}


def test_draining_spreads_queues_over_the_least_loaded_brokers() -> None:
    queues = static_plan.add_queues({}, 6, ["a", "b", "c"], {})
    moves = static_plan.spread_moves(queues, [2, 5], ["a", "b"])
    assert sorted(moves.values()) == ["a", "b"]


def _queue() -> LogicalQueue:
    segments = (
        Segment(item(0, "a", 0, 0, end=20), "127.0.0.1:1"),
        Segment(item(1, "b", 0, 10_000), "127.0.0.1:2"),
    )
    return LogicalQueue("t", 0, segments, 7, True)


def test_a_pull_in_the_gap_after_a_sealed_segment_moves_on_without_a_request() -> None:
    result = plan_pull(_queue(), 20, 10, timeout_ms=1000)
    assert not isinstance(result, PullPlan)
    assert (result.status, result.next_offset) == (PullStatus.NO_MATCHED_MSG, 10_000)


def test_a_pull_of_a_sealed_segment_never_asks_past_its_end() -> None:
    plan = plan_pull(_queue(), 15, 100, timeout_ms=1000)
    assert isinstance(plan, PullPlan)
    assert plan.request.ext["maxMsgNums"] == 5 and plan.request.ext["gen"] == 0 and plan.request.ext["epoch"] == 7


def test_offset_moved_in_the_middle_of_the_chain_is_not_out_of_range() -> None:
    plan = plan_pull(_queue(), 3, 100, timeout_ms=1000)
    assert isinstance(plan, PullPlan)
    emptied = RemotingCommand(ResponseCode.PULL_OFFSET_MOVED, ext={"next": 20, "min": 20, "max": 20})
    result = finish_pull(plan, emptied, verify=True)
    assert result.status is PullStatus.OFFSET_ILLEGAL and result.next_offset == 10_000  # first segment expired
    leader_plan = plan_pull(_queue(), 10_050, 10, timeout_ms=1000)
    assert isinstance(leader_plan, PullPlan)
    beyond = RemotingCommand(ResponseCode.PULL_OFFSET_MOVED, ext={"next": 8, "min": 0, "max": 8})
    result = finish_pull(leader_plan, beyond, verify=True)
    assert result.status is PullStatus.OFFSET_ILLEGAL and result.next_offset == 10_008
