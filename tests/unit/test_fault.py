"""The latency fault table (RocketMQ's MQFaultStrategy) as pure logic."""

from __future__ import annotations

import time

import pytest

from rocketspark.client.fault import (
    ROCKETMQ_5X_LATENCY_MAX_MS,
    ROCKETMQ_5X_NOT_AVAILABLE_MS,
    LatencyFaultTolerance,
)


@pytest.mark.parametrize(
    ("latency", "unavailable"),
    [
        (10, 0),
        (50, 0),
        (120, 0),
        (549, 0),
        (550, 30_000),
        (999, 30_000),
        (1000, 60_000),
        (2500, 120_000),
        (3000, 180_000),
        (15_000, 600_000),
        (99_999, 600_000),
    ],
)
def test_the_rocketmq_4x_table(latency: int, unavailable: int) -> None:
    assert LatencyFaultTolerance().unavailable_ms(latency) == unavailable


def test_the_rocketmq_5x_table_is_configurable() -> None:
    fault = LatencyFaultTolerance(ROCKETMQ_5X_LATENCY_MAX_MS, ROCKETMQ_5X_NOT_AVAILABLE_MS)
    assert [fault.unavailable_ms(x) for x in (100, 600, 2000, 4000, 6000, 20_000)] == [
        0,
        2000,
        5000,
        6000,
        10_000,
        30_000,
    ]


def test_a_failure_counts_as_the_worst_latency_and_marks_the_broker() -> None:
    fault = LatencyFaultTolerance(latency_max_ms=(50, 100), not_available_ms=(0, 200))
    fault.update("a", 5, failed=True)
    fault.update("b", 10)
    assert not fault.available("a") and fault.available("b")
    time.sleep(0.25)
    assert fault.available("a")


def test_the_least_bad_broker_is_the_one_available_soonest() -> None:
    fault = LatencyFaultTolerance(latency_max_ms=(50, 100, 200), not_available_ms=(0, 1000, 5000))
    fault.update("slow", 300)
    fault.update("slower", 150)
    assert fault.least_bad(["slow", "slower"]) == "slower"
    assert fault.least_bad(["slow", "fresh"]) == "fresh"


def test_a_malformed_table_is_refused() -> None:
    with pytest.raises(ValueError, match="equal length"):
        LatencyFaultTolerance((1, 2), (0,))
