"""The pop state machine: invisibility, attempts, receipts, the watermark and message-group order."""

from __future__ import annotations

from rocketspark.grpcv2.popstate import Inflight, PopQueue, Receipt
from rocketspark.protocol.types import MessageExt

MAX = 10  # attempts


def message(offset: int, group: str | None = None) -> MessageExt:
    properties = {"__SHARDINGKEY": group} if group else {}
    return MessageExt("t", 0, offset, b"x", None, None, properties, 0, 0, offset * 100, "broker-a")


def take(queue: PopQueue, wanted: int, *, now: float, invisible_s: float) -> list[Inflight]:
    return queue.take(wanted, now, invisible_s, max_attempts=MAX, max_inflight=1000)


def queue_with(*messages: MessageExt) -> PopQueue:
    queue = PopQueue(0, next_offset=0, committed=0)
    queue.add(list(messages), messages[-1].queue_offset + 1)
    return queue


def test_a_message_is_invisible_until_its_deadline_then_comes_back_with_its_attempt_raised() -> None:
    queue = queue_with(message(0), message(1))
    first = take(queue, 1, now=0.0, invisible_s=10)
    assert [(f.message.queue_offset, f.attempt) for f in first] == [(0, 1)]
    assert [f.message.queue_offset for f in take(queue, 5, now=5.0, invisible_s=10)] == [1]
    assert take(queue, 5, now=9.9, invisible_s=10) == []
    again = take(queue, 5, now=10.0, invisible_s=10)
    assert [(f.message.queue_offset, f.attempt) for f in again] == [(0, 2)]


def test_only_the_latest_receipt_acks_and_the_watermark_follows_the_oldest_unacked() -> None:
    queue = queue_with(message(0), message(1), message(2))
    taken = take(queue, 3, now=0.0, invisible_s=1)
    old = Receipt.decode(taken[0].handle)
    assert old is not None
    redelivered = take(queue, 1, now=2.0, invisible_s=1)[0]
    assert not queue.ack(old)  # stale: the message was delivered again since
    assert queue.ack(Receipt.decode(taken[2].handle))  # type: ignore[arg-type]
    assert queue.watermark() == 0
    assert queue.ack(Receipt.decode(redelivered.handle))  # type: ignore[arg-type]
    assert queue.watermark() == 1
    assert queue.ack(Receipt.decode(taken[1].handle))  # type: ignore[arg-type]
    assert queue.watermark() == 3


def test_after_its_last_attempt_a_message_stays_in_flight_until_the_dead_letter_queue_has_it() -> None:
    queue = queue_with(message(0), message(1, "g"), message(2, "g"))
    for now in (0.0, 1.0, 2.0):
        assert len(queue.take(1, now=now, invisible_s=1, max_attempts=3, max_inflight=1000)) == 1
    assert queue.expired(now=2.5, max_attempts=3) == []  # still invisible
    [dead] = queue.expired(now=3.0, max_attempts=3)
    assert (dead.message.queue_offset, dead.attempt, dead.dead) == (0, 3, True)
    assert queue.expired(now=3.0, max_attempts=3) == []  # marked once
    assert queue.watermark() == 0  # the DLQ does not have it yet
    assert queue.take(5, now=4.0, invisible_s=1, max_attempts=3, max_inflight=1000)[0].message.queue_offset == 1
    queue.not_dead_lettered(dead, retry_at=5.0)  # the send failed: tried again, never handed out again
    assert 0 not in {f.message.queue_offset for f in queue.take(5, 6.0, 1, max_attempts=3, max_inflight=1000)}
    [again] = queue.expired(now=6.0, max_attempts=3)
    queue.dead_lettered(again)
    assert queue.watermark() == 1


def test_no_more_than_max_inflight_are_handed_out_unacknowledged() -> None:
    queue = queue_with(*(message(i) for i in range(5)))
    assert len(queue.take(10, now=0.0, invisible_s=60, max_attempts=MAX, max_inflight=3)) == 3
    assert queue.take(10, now=1.0, invisible_s=60, max_attempts=MAX, max_inflight=3) == []


def test_a_message_group_is_handed_out_one_at_a_time_in_order() -> None:
    queue = queue_with(message(0, "a"), message(1, "a"), message(2, "b"), message(3))
    assert [f.message.queue_offset for f in take(queue, 10, now=0.0, invisible_s=5)] == [0, 2, 3]
    first = queue.inflight[0]
    assert take(queue, 10, now=1.0, invisible_s=5) == []  # 1 waits for 0
    assert queue.ack(Receipt.decode(first.handle))  # type: ignore[arg-type]
    assert [f.message.queue_offset for f in take(queue, 10, now=1.0, invisible_s=5)] == [1]


def test_a_redelivered_group_message_still_comes_before_its_successor() -> None:
    queue = queue_with(message(0, "a"), message(1, "a"))
    take(queue, 10, now=0.0, invisible_s=1)
    again = take(queue, 10, now=1.0, invisible_s=1)
    assert [(f.message.queue_offset, f.attempt) for f in again] == [(0, 2)]


def test_a_change_of_invisibility_gives_a_new_receipt_and_a_bad_handle_decodes_to_none() -> None:
    queue = queue_with(message(0))
    [taken] = take(queue, 1, now=0.0, invisible_s=1)
    receipt = Receipt.decode(taken.handle)
    assert receipt is not None
    changed = queue.change_invisible(receipt, now=0.5, invisible_s=30)
    assert changed is not None and changed.visible_at == 30.5
    assert queue.change_invisible(receipt, now=0.6, invisible_s=30) is None  # the old handle is stale now
    assert Receipt.decode("x.y") is None and Receipt.decode("1.2.") is None


class NoTrace:
    def traced_topic(self, topic: str) -> bool:
        return False

    def noted(self, kind: str, message: object, group: str, client: str, detail: str) -> None:
        raise AssertionError("nothing is traced")


class NoClients:
    """Pop's cluster clients, never used by the renewal rule."""

    consumer = producer = admin = None


def test_a_push_consumers_deliveries_stay_invisible_while_it_is_heard_from() -> None:
    import time

    from rocketspark.grpcv2.limits import PopLimits
    from rocketspark.grpcv2.pop import Pop
    from rocketspark.grpcv2.popstate import GroupTopic
    from rocketspark.grpcv2.presence import Presence

    limits = PopLimits(min_invisible_ms=10_000, max_invisible_ms=12 * 3_600_000, max_reconsume_times=16)
    assert limits.default_invisible_ms == 60_000
    pop = Pop(NoClients(), limits, lambda: "endpoint", Presence(), NoTrace())  # type: ignore[arg-type]
    queue = queue_with(message(0), message(1))
    state = GroupTopic("g", "t", {0: queue}, owned={0})
    mine, theirs = take(queue, 2, now=time.monotonic(), invisible_s=60)
    mine.consumer, mine.renew, mine.renew_until = "push-1", True, time.monotonic() + 3600
    theirs.consumer, theirs.renew, theirs.renew_until = "gone-2", True, time.monotonic() + 3600
    for f in (mine, theirs):
        f.visible_at = time.monotonic() + 5  # about to come back
    pop.heard_from("push-1")
    pop.renew_deliveries(state)
    assert mine.visible_at > time.monotonic() + 55  # its consumer lives: invisible again
    assert theirs.visible_at < time.monotonic() + 6  # never heard from: it comes back as due
    mine.visible_at, mine.renew_until = time.monotonic() + 5, time.monotonic() - 1
    pop.renew_deliveries(state)
    assert mine.visible_at < time.monotonic() + 6  # renewed long enough: no more


def test_what_a_gone_consumer_held_is_visible_at_once_with_its_attempt_raised_on_redelivery() -> None:
    queue = queue_with(message(0), message(1), message(2))
    first, second, third = take(queue, 3, now=0.0, invisible_s=60)
    first.consumer = second.consumer = "dead-1"
    third.consumer = "alive-2"
    second.dead = True  # on its way to the dead-letter queue: stays with it
    assert queue.release("dead-1", now=5.0) == 1
    assert queue.release("nobody", now=5.0) == 0
    assert take(queue, 10, now=5.0, invisible_s=60) == [first]  # not third: its consumer lives
    assert (first.attempt, first.consumer) == (2, "")  # a redelivery, counted as RocketMQ counts it


def test_a_released_message_still_acks_with_its_handle_until_it_is_handed_out_again() -> None:
    queue = queue_with(message(0))
    [taken] = take(queue, 1, now=0.0, invisible_s=60)
    taken.consumer = "c"
    receipt = Receipt.decode(taken.handle)
    assert receipt is not None
    queue.release("c", now=1.0)
    assert queue.ack(receipt)  # the client was alive after all: its late ack counts
    assert take(queue, 1, now=2.0, invisible_s=60) == []


def prioritized(offset: int, priority: int | None) -> MessageExt:
    properties = {} if priority is None else {"_SYS_MSG_PRIORITY_": str(priority)}
    return MessageExt("t", 0, offset, b"x", None, None, properties, 0, 0, offset * 100, "broker-a")


def test_a_queue_with_priority_messages_hands_out_the_highest_first_then_by_offset() -> None:
    queue = queue_with(prioritized(0, None), prioritized(1, 2), prioritized(2, 9), prioritized(3, 2), prioritized(4, 0))
    order = [f.message.queue_offset for f in take(queue, 3, now=0.0, invisible_s=10)]
    assert order == [2, 1, 3]  # 9, then the two of priority 2 in offset order
    assert [m.queue_offset for m in queue.pending] == [0, 4]  # still in offset order
    assert queue.watermark() == 0  # the message without a priority holds it
    assert [f.message.queue_offset for f in take(queue, 5, now=0.0, invisible_s=10)] == [4, 0]


def test_redeliveries_of_a_prioritized_queue_come_back_higher_priority_first() -> None:
    queue = queue_with(prioritized(0, 1), prioritized(1, 5))
    assert [f.message.queue_offset for f in take(queue, 2, now=0.0, invisible_s=1)] == [1, 0]
    again = take(queue, 2, now=2.0, invisible_s=1)
    assert [(f.message.queue_offset, f.attempt) for f in again] == [(1, 2), (0, 2)]


def test_a_queue_without_priority_messages_keeps_offset_order() -> None:
    queue = queue_with(message(0), message(1), message(2))
    assert not queue.prioritized
    assert [f.message.queue_offset for f in take(queue, 3, now=0.0, invisible_s=1)] == [0, 1, 2]
