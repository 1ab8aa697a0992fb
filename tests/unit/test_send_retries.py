"""What a producer does after a failed send attempt (``SendRetries``): in particular, a send
that gives up after busy answers says the broker was busy, never that a leftover attempt
timed out."""

from __future__ import annotations

import time

import pytest

from rocketspark.client.selection import PublishInfo, Target, publish_info_of
from rocketspark.client.send_retries import MIN_ATTEMPT_S, SendRetries, attempt_timeout_ms
from rocketspark.errors import (
    ConnectError,
    RequestTimeoutError,
    SlaveNotAvailableError,
    SystemBusyError,
    TopicNotExistError,
)
from rocketspark.protocol.types import BrokerData, Perm, QueueData, TopicRouteData

BUSY_DETAILS = {"inflightBytes": 70_000, "requestBytes": 65_537, "limitBytes": 1}


class Routes:
    def __init__(self) -> None:
        self.invalidated: list[str] = []

    def invalidate(self, topic: str) -> None:
        self.invalidated.append(topic)


def info() -> PublishInfo:
    brokers = tuple(BrokerData("C", name, "127.0.0.1:1") for name in ("broker-a", "broker-b"))
    queues = tuple(QueueData(name, 1, 1, Perm.READ_WRITE) for name in ("broker-a", "broker-b"))
    return publish_info_of(TopicRouteData("orders", brokers, queues))


def retries(left_s: float, attempts: int = 3) -> SendRetries:
    return SendRetries("orders", Routes(), attempts, time.monotonic() + left_s, pinned=False)


def busy() -> SystemBusyError:
    return SystemBusyError("broker broker-a is busy: ...", **BUSY_DETAILS)


def at(broker: str) -> Target:
    return Target(broker, 0)


def test_a_busy_answer_with_time_left_backs_off_and_avoids_the_broker() -> None:
    state = retries(left_s=10)
    pause = state.after(busy(), info(), at("broker-a"))
    assert 0 < pause <= 0.05 and state.avoid == "broker-a" and state.failures == 0  # no attempt used up


def test_too_little_time_after_a_busy_answer_raises_busy_with_the_broker_count_and_budget() -> None:
    state = retries(left_s=10)
    state.after(busy(), info(), at("broker-a"))
    state.after(busy(), info(), at("broker-b"))
    state.deadline = time.monotonic() + MIN_ATTEMPT_S / 2  # what is left cannot hold another attempt
    with pytest.raises(SystemBusyError) as gave_up:
        state.after(busy(), info(), at("broker-a"))
    message = gave_up.value.message
    assert message.startswith('send to topic "orders" gave up after ')
    assert 'brokers "broker-a" (2), "broker-b" (1) answered SYSTEM_BUSY 3 time(s)' in message
    assert "max_inflight_request_bytes) is 1 bytes and 70000 bytes were in flight" in message
    assert "nothing of this send was stored" in message and "send_timeout_ms" in message
    assert gave_up.value.details == {"broker": "broker-a", "busyAnswers": 3, **BUSY_DETAILS}
    assert gave_up.value.retriable


def test_a_leftover_attempt_that_times_out_after_busy_answers_still_reports_busy() -> None:
    """The loaded-machine case: busy answers, then the last attempt got what was left and timed
    out. The send was refused for being busy, not for a broker that did not answer."""
    state = retries(left_s=10)
    state.after(busy(), info(), at("broker-a"))
    state.deadline = time.monotonic() + MIN_ATTEMPT_S / 2
    timeout = RequestTimeoutError("broker-a at 127.0.0.1:1 did not answer request code 10 within 0.017 s")
    with pytest.raises(SystemBusyError, match=r'broker "broker-a" \(1\) answered SYSTEM_BUSY 1 time') as gave_up:
        state.after(timeout, info(), at("broker-a"))
    assert gave_up.value.message.endswith("; after that, " + timeout.message)  # nothing hidden
    assert gave_up.value.__cause__ is timeout


def test_attempts_used_up_by_timeouts_after_a_busy_answer_report_busy() -> None:
    state = retries(left_s=10, attempts=2)
    state.after(busy(), info(), at("broker-a"))
    state.after(ConnectError("broker-b at 127.0.0.1:1 is unreachable (connection refused)"), info(), at("broker-b"))
    with pytest.raises(SystemBusyError, match=r"after that, broker-b at 127\.0\.0\.1:1 did not answer"):
        state.after(RequestTimeoutError("broker-b at 127.0.0.1:1 did not answer"), info(), at("broker-b"))


def test_without_busy_answers_the_last_failure_is_raised_as_it_was() -> None:
    state = retries(left_s=10, attempts=2)
    state.after(RequestTimeoutError("first"), info(), at("broker-a"))
    last = RequestTimeoutError("second")
    with pytest.raises(RequestTimeoutError) as raised:
        state.after(last, info(), at("broker-b"))
    assert raised.value is last


def test_a_definite_refusal_after_busy_answers_is_raised_as_it_was() -> None:
    state = retries(left_s=10, attempts=1)
    state.after(busy(), info(), at("broker-a"))
    missing = TopicNotExistError("topic orders does not exist")
    with pytest.raises(TopicNotExistError) as raised:
        state.after(missing, info(), at("broker-b"))
    assert raised.value is missing


def test_too_few_in_sync_replicas_until_the_end_keeps_its_own_error() -> None:
    state = retries(left_s=MIN_ATTEMPT_S / 2)
    refused = SlaveNotAvailableError("broker-a has 1 in-sync replica of the 2 in_sync_replicas asks")
    with pytest.raises(SlaveNotAvailableError, match=r"in_sync_replicas asks \(the send gave up after 1 such answers"):
        state.after(refused, info(), at("broker-a"))


def test_an_older_broker_without_budget_numbers_is_still_named() -> None:
    state = retries(left_s=MIN_ATTEMPT_S / 2)
    with pytest.raises(SystemBusyError, match=r"budget \(max_inflight_request_bytes\) was full"):
        state.after(SystemBusyError("busy"), info(), at("broker-a"))


@pytest.mark.parametrize(
    ("left_s", "attempts_left", "pinned", "configured_ms", "expected_ms"),
    [
        (3.0, 3, False, None, 1000),  # an equal share of what is left
        (3.0, 1, False, None, 3000),  # the last attempt: all that is left
        (3.0, 3, True, None, 3000),  # a pinned send is retried on its queue: all that is left
        (0.06, 3, False, None, 50),  # never less than MIN_ATTEMPT_S of what is left
        (0.02, 3, False, None, 20),  # but never more than is left
        (3.0, 3, False, 400, 400),  # send_attempt_timeout_ms, when set
        (0.2, 3, False, 400, 200),  # capped by what is left
    ],
)
def test_an_attempt_waits_its_share_of_what_is_left(
    left_s: float, attempts_left: int, pinned: bool, configured_ms: int | None, expected_ms: int
) -> None:
    """The rule every attempt's wait follows (the producer passes the attempts left: all of
    them before the first failure, ``SendRetries.attempts_left`` after)."""
    assert MIN_ATTEMPT_S == 0.05
    now = 0.0  # whole milliseconds left, with no rounding of a sum in the way
    assert attempt_timeout_ms(now + left_s, now, attempts_left, pinned, configured_ms) == expected_ms


def test_the_publish_info_names_the_routes_replica_groups() -> None:
    brokers = (
        BrokerData("C", "broker-a", "127.0.0.1:1"),
        BrokerData("C", "broker-b", "127.0.0.1:2", replicas=("127.0.0.1:3",)),
    )
    queues = tuple(QueueData(name, 1, 1, Perm.READ_WRITE) for name in ("broker-a", "broker-b"))
    assert publish_info_of(TopicRouteData("orders", brokers, queues)).groups == frozenset({"broker-b"})
