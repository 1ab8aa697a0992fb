"""failOnDataLoss: expired offsets fail the query, naming the queue and range, or are skipped."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rocketspark import Admin, Consumer, LocalCluster, Message, Producer
from tests.helpers import eventually
from tests.spark.helpers import reader, run_available_now

pytestmark = [pytest.mark.spark, pytest.mark.slow]
EXPIRING = {
    "segment_bytes": 64 * 1024,
    "max_message_bytes": 16 * 1024,
    "retention_hours": 1.0 / 3600,
    "retention_check_interval_ms": 200,
}


@pytest.fixture(scope="module")
def expiring() -> Iterator[LocalCluster]:
    with LocalCluster(brokers=1, broker_config=EXPIRING) as cluster:
        yield cluster


def test_expired_offsets_fail_the_query_or_are_skipped_exactly(
    spark: Any, expiring: LocalCluster, tmp_path: Path
) -> None:
    ns, topic = expiring.nameserver, "expiring"
    with Admin(ns) as admin:
        admin.create_static_topic(topic, 1, brokers=["broker-a"])
    with Producer(ns) as producer:
        for i in range(100):
            producer.send(Message(topic, f"{i:05d}".encode() * 100))

    def run(mode: str, **options: Any) -> None:
        events = reader(spark, ns, topic, **options).select("queueOffset")
        run_available_now(events, str(tmp_path / mode), fmt="parquet", path=str(tmp_path / f"{mode}-out"))

    for mode in ("strict", "lenient"):  # both queries read the first 100, then stop
        run(mode, startingOffsets="earliest")
    with Producer(ns) as producer:
        for i in range(100, 700):
            producer.send(Message(topic, f"{i:05d}".encode() * 100))
    time.sleep(1.5)
    with Producer(ns) as producer:
        producer.send(Message(topic, b"last"))
    with Consumer(ns) as consumer:
        low = eventually(lambda: consumer.min_offset(topic, 0) if consumer.min_offset(topic, 0) > 100 else 0, 20)

    with pytest.raises(Exception) as failure:
        run("strict", failOnDataLoss="true")
    text = str(failure.value)
    assert f"data loss in topic {topic} logical queue 0: offsets [100, " in text
    assert "failOnDataLoss" in text

    with Consumer(ns) as consumer:
        low = consumer.min_offset(topic, 0)
    run("lenient", failOnDataLoss="false")
    offsets = sorted(r.queueOffset for r in spark.read.parquet(str(tmp_path / "lenient-out")).collect())
    assert offsets[:100] == list(range(100))
    assert offsets[100:] == list(range(low, 701))  # skipped exactly [100, low)
