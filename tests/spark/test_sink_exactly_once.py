"""The sink's micro-batch idempotence has no caveats left: a re-run of a micro-batch stores
nothing twice when its logical queues were remapped to another broker in between, nor when the
broker was SIGKILLed right after acknowledging the batch (the producer ids and sequences live in
the batch records' headers: the new leader is handed them, a restarted broker replays its log).
Output is compared exactly, message for message."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from rocketspark import Admin, Consumer, LocalCluster, Message, Producer
from tests.spark.helpers import forget_last_commit, reader, run_available_now

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def produce(ns: str, topic: str, count: int) -> list[bytes]:
    bodies = [f"event-{i:05d}".encode() for i in range(count)]
    with Producer(ns) as producer:
        producer.send_batch([Message(topic, body) for body in bodies])
    return bodies


def stored(ns: str, topic: str, queues: int) -> Counter[bytes]:
    with Consumer(ns) as consumer:
        return Counter(m.body for q in range(queues) for r in consumer.iter_range(topic, q, 0) for m in r.messages)


def copy_query(spark: Any, ns: str, source: str, target: str, checkpoint: Path) -> None:
    events = reader(spark, ns, source, startingOffsets="earliest", maxOffsetsPerTrigger=300)
    run_available_now(
        events.selectExpr("body", "CAST(queueOffset AS STRING) AS shardingKey"),
        str(checkpoint),
        fmt="rocketmq",
        nameserver=ns,
        topic=target,
    )


def test_a_rerun_after_its_queues_were_remapped_stores_nothing_twice(
    spark: Any, cluster: LocalCluster, tmp_path: Path
) -> None:
    ns, source, target = cluster.nameserver, "remap-rerun-in", "remap-rerun-out"
    with Admin(ns) as admin:
        admin.create_static_topic(source, 2, brokers=["broker-a"])
        admin.create_static_topic(target, 4, brokers=["broker-a", "broker-b"])
    sent = produce(ns, source, 900)
    checkpoint = tmp_path / "cp"
    copy_query(spark, ns, source, target, checkpoint)
    last, _ = forget_last_commit(checkpoint)  # the driver died before recording the last commit
    assert last == 2

    with Admin(ns) as admin:
        before = admin.broker_counters("broker-c").get("duplicatesDropped", 0)
        admin.remap_static_topic(target, [0, 1, 2, 3], "broker-c")  # every queue to a broker that saw none of it
    copy_query(spark, ns, source, target, checkpoint)

    assert stored(ns, target, 4) == Counter(sent)
    with Admin(ns) as admin:
        assert admin.broker_counters("broker-c").get("duplicatesDropped", 0) - before == 300  # the re-run batch


def test_a_rerun_after_the_broker_was_sigkilled_right_after_acknowledging_stores_nothing_twice(
    spark: Any, tmp_path: Path
) -> None:
    # No periodic save of the producer table while it runs: only the log can tell the restarted
    # broker what it had stored.
    config = {"auto_create_topic_enable": False, "checkpoint_interval_ms": 600_000}
    with LocalCluster(brokers=1, processes=True, broker_config=config, data_dir=tmp_path / "data") as c:
        ns, source, target = c.nameserver, "kill-rerun-in", "kill-rerun-out"
        with Admin(ns) as admin:
            admin.create_topic(source, queues=2)
            admin.create_topic(target, queues=3)
        sent = produce(ns, source, 600)
        checkpoint = tmp_path / "cp"
        copy_query(spark, ns, source, target, checkpoint)
        c.kill_broker("broker-a")  # SIGKILL the moment the last micro-batch was acknowledged
        saved = tmp_path / "data" / "broker-a" / "config" / "producers.json"
        rows = json.loads(saved.read_text())["producers"] if saved.exists() else []
        assert not [row for row in rows if row[1] == target]  # nothing saved: only the log knows
        c.start_broker("broker-a")
        forget_last_commit(checkpoint)
        copy_query(spark, ns, source, target, checkpoint)

        assert stored(ns, target, 3) == Counter(sent)
        with Admin(ns) as admin:
            assert admin.broker_counters("broker-a").get("duplicatesDropped", 0) == 300
