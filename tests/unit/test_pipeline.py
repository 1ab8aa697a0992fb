"""The pull pipeline, as pure logic over a fake transport: what is in flight when, and where."""

from __future__ import annotations

import dataclasses
from concurrent.futures import Future

import pytest

from rocketspark.client.logical import LogicalQueue, Segment
from rocketspark.client.pipeline import Pipeline, PlanAt
from rocketspark.client.pulling import PullPlan, plan_pull
from rocketspark.errors import ConnectError
from rocketspark.protocol.codes import ResponseCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.static_mapping import LogicQueueMappingItem
from rocketspark.protocol.types import PullResult


class FakeBroker:
    """Answers a pull for physical offset X with ``next`` X + 4 (a queue of ``size``), and
    records every request when it is sent; addresses in ``down`` refuse to connect."""

    def __init__(self, size: int, down: tuple[str, ...] = ()) -> None:
        self.size, self.down = size, set(down)
        self.sent: list[tuple[str, int]] = []

    def invoke_async(
        self, address: str, request: RemotingCommand, timeout_ms: int | None = None
    ) -> Future[RemotingCommand]:
        offset = int(request.ext["queueOffset"])
        self.sent.append((address, offset))
        future: Future[RemotingCommand] = Future()
        if address in self.down:
            future.set_exception(ConnectError(f"broker at {address} is unreachable"))
            return future
        code = ResponseCode.SUCCESS if offset < self.size else ResponseCode.PULL_NOT_FOUND
        nxt = min(offset + 4, self.size)
        future.set_result(request.response(code, ext={"next": nxt, "min": 0, "max": self.size}))
        return future

    def invoke(self, address: str, request: RemotingCommand, timeout_ms: int | None = None) -> RemotingCommand:
        return self.invoke_async(address, request, timeout_ms).result()


def two_segments() -> LogicalQueue:
    """[0, 8) sealed on a, then from 100 open on b."""
    items = (
        LogicQueueMappingItem(gen=0, queue_id=0, bname="a", logic_offset=0, end_offset=8),
        LogicQueueMappingItem(gen=1, queue_id=0, bname="b", logic_offset=100),
    )
    return LogicalQueue("t", 0, (Segment(items[0], "a:1"), Segment(items[1], "b:1")), 1, True)


def planner(queue: LogicalQueue, end: int | None = None) -> PlanAt:
    def plan_at(offset: int) -> PullPlan | PullResult:
        return plan_pull(queue, offset, 4, end=end, timeout_ms=1000)

    return plan_at


def test_the_next_pull_is_sent_before_the_caller_sees_the_answer() -> None:
    broker = FakeBroker(size=16)
    queue = two_segments()
    pipeline = Pipeline(broker, planner(queue), end=108)
    pulled = pipeline.pull(0)
    assert isinstance(pulled, tuple)
    assert broker.sent == [("a:1", 0), ("a:1", 4)]  # the second is in flight already
    pipeline.pull(4)
    # past the sealed end of a: the following pull goes to the next segment's start
    assert broker.sent[-1] == ("b:1", 0)
    pipeline.pull(100)
    assert broker.sent[-1] == ("b:1", 4)  # logical 104: still short of the end
    pipeline.pull(104)
    assert broker.sent[-1] == ("b:1", 4), "nothing is sent for logical 108, the end"


def test_a_pull_in_flight_for_another_offset_is_not_used() -> None:
    broker = FakeBroker(size=16)
    pipeline = Pipeline(broker, planner(two_segments()))
    pipeline.pull(0)
    pipeline.pull(2)  # the caller went elsewhere (a tag filter, a re-plan): asked afresh
    assert broker.sent == [("a:1", 0), ("a:1", 4), ("a:1", 2), ("a:1", 6)]


def test_a_pull_planned_with_an_end_asks_for_no_more() -> None:
    plan = plan_pull(two_segments(), 100, 32, end=110, timeout_ms=1000)
    assert isinstance(plan, PullPlan)
    assert (plan.request.ext["maxMsgNums"], plan.request.ext["endOffset"]) == (10, 10)
    sealed = plan_pull(two_segments(), 2, 32, end=50, timeout_ms=1000)
    assert isinstance(sealed, PullPlan)
    assert (sealed.request.ext["maxMsgNums"], sealed.request.ext["endOffset"]) == (6, 8)


def test_recover_picks_where_a_failed_pull_goes_and_without_it_the_error_is_raised() -> None:
    broker = FakeBroker(size=16, down=("a:1",))
    queue = two_segments()
    with pytest.raises(ConnectError, match="a:1"):
        Pipeline(broker, planner(queue)).pull(0)

    def elsewhere(plan: PullPlan, exc: ConnectError) -> PullPlan:
        return dataclasses.replace(plan, address="a:2")

    pulled = Pipeline(broker, planner(queue), recover=elsewhere).pull(0)
    assert isinstance(pulled, tuple) and pulled[0].address == "a:2"
    assert broker.sent[-2:] == [("a:2", 0), ("a:1", 4)]  # the next is planned afresh (its own recover)
