"""Damage done to a real broker's files, as an unlucky operator or a failing disk would do it.

Each test does the damage on a real broker process and checks what issue 8 asks: every
message the commit log holds is readable at its offset or a clear error names it, never
another queue's message, and the broker stays up (or refuses to start with one clear line).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from rocketspark import Admin, Consumer, LocalCluster, Message, Producer

pytestmark = pytest.mark.integration

ENTRY_SIZE = 40  # broker.store.consumequeue: one entry per batch
SMALL_STORE = {
    "auto_create_topic_enable": False,
    "segment_bytes": 64 * 1024,
    "max_message_bytes": 16 * 1024,
    "queue_entries_per_file": 64,
    "checkpoint_interval_ms": 100,
}


def produce(cluster: LocalCluster, topic: str, queues: int, per_queue: int) -> dict[int, list[bytes]]:
    """Send ``per_queue`` messages to each queue of a new topic; return the bodies by queue."""
    with Admin(cluster.nameserver) as admin:
        admin.create_topic(topic, queues=queues)
    bodies: dict[int, list[bytes]] = {q: [] for q in range(queues)}
    with Producer(cluster.nameserver) as producer:
        for i in range(per_queue):
            for q in range(queues):
                body = f"{topic}-q{q}-m{i:05d}-".encode() * 4
                result = producer.send(Message(topic, body, queue_id=q))
                assert result.queue_offset == i
                bodies[q].append(body)
    return bodies


def read_queue(cluster: LocalCluster, topic: str, queue_id: int) -> list[tuple[int, bytes]]:
    out: list[tuple[int, bytes]] = []
    with Consumer(cluster.nameserver) as consumer:
        offset = 0
        while True:
            pulled = consumer.pull(topic, queue_id, offset, max_messages=100)
            if pulled.next_offset <= offset:  # caught up (a run of lost records answers no message, but moves on)
                return out
            for m in pulled.messages:
                assert (m.topic, m.queue_id) == (topic, queue_id)  # never another queue's message
                out.append((m.queue_offset, m.body))
            offset = pulled.next_offset


def assert_all_readable(cluster: LocalCluster, topic: str, bodies: dict[int, list[bytes]]) -> None:
    for q, expected in bodies.items():
        assert read_queue(cluster, topic, q) == list(enumerate(expected)), f"queue {q}"


def queue_dir(cluster: LocalCluster, topic: str, queue_id: int) -> Path:
    return cluster.data_dir / "broker-a" / "consumequeue" / topic / str(queue_id)


def counters(cluster: LocalCluster) -> dict[str, object]:
    with Admin(cluster.nameserver) as admin:
        values: dict[str, object] = admin.broker_counters("broker-a")
        return values


def restart(cluster: LocalCluster) -> None:
    cluster.stop_broker("broker-a")
    cluster.start_broker("broker-a")


def test_a_deleted_oldest_consume_queue_file_is_rebuilt_not_hidden(
    make_cluster: Callable[..., LocalCluster], topic_name: str
) -> None:
    cluster = make_cluster(broker_config=SMALL_STORE)
    bodies = produce(cluster, topic_name, queues=2, per_queue=150)  # three files of 64 entries each
    cluster.stop_broker("broker-a")
    (queue_dir(cluster, topic_name, 1) / f"{0:020d}").unlink()
    cluster.start_broker("broker-a")

    with Consumer(cluster.nameserver) as consumer:
        assert consumer.min_offset(topic_name, 1) == 0  # not 64, the first remaining file's start
    assert_all_readable(cluster, topic_name, bodies)
    assert counters(cluster)["queuesRebuilt"] == 1
    log = (cluster.data_dir / "broker-a.log").read_text()
    assert f"consume queue {topic_name}/1 starts at offset 64 but the checkpoint saw it start at 0" in log


@pytest.mark.parametrize("damage", ["copied from another queue", "garbage"])
def test_a_wrong_consume_queue_entry_is_never_answered_from(
    make_cluster: Callable[..., LocalCluster], topic_name: str, damage: str
) -> None:
    cluster = make_cluster(broker_config=SMALL_STORE)
    bodies = produce(cluster, topic_name, queues=2, per_queue=40)
    victim, donor = queue_dir(cluster, topic_name, 0) / f"{0:020d}", queue_dir(cluster, topic_name, 1) / f"{0:020d}"
    entry = donor.read_bytes()[17 * ENTRY_SIZE : 18 * ENTRY_SIZE] if damage != "garbage" else os.urandom(ENTRY_SIZE)
    fd = os.open(victim, os.O_WRONLY)  # the running broker reads this file: it sees the change at once
    try:
        os.pwrite(fd, entry, 17 * ENTRY_SIZE)
    finally:
        os.close(fd)

    assert_all_readable(cluster, topic_name, bodies)  # the consumer retries once, after the rebuild
    values = counters(cluster)
    assert values["indexMismatches"] == 1 and values["queuesRebuilt"] == 1
    log = (cluster.data_dir / "broker-a.log").read_text()
    assert f"consume queue {topic_name}/0 at queue offset 17 disagrees with the commit log" in log
    if damage != "garbage":
        assert f"belongs to {topic_name}/1 at queue offset 17" in log


def test_damage_in_a_sealed_segment_is_found_by_the_scrub_before_any_reader(
    make_cluster: Callable[..., LocalCluster], topic_name: str
) -> None:
    cluster = make_cluster(broker_config={**SMALL_STORE, "scrub_pause_ms": 300, "scrub_bytes_per_s": 1 << 30})
    bodies = produce(cluster, topic_name, queues=1, per_queue=600)
    segments = sorted((cluster.data_dir / "broker-a" / "commitlog").iterdir())
    assert len(segments) >= 3
    fd = os.open(segments[1], os.O_WRONLY)
    try:
        os.pwrite(fd, b"bit rot", 1000)  # inside some record of a sealed segment
    finally:
        os.close(fd)

    deadline = time.monotonic() + 20
    while counters(cluster)["scrubDamagedSegments"] == 0:
        assert time.monotonic() < deadline, "the scrub did not find the damage"
        time.sleep(0.2)
    values = counters(cluster)
    found = str(values["scrubDamage"])
    assert segments[1].name in found  # where the rot landed in its record decides which check names it
    assert any(reason in found for reason in ("CRC mismatch", "bad magic", "impossible record size")), found

    got = read_queue(cluster, topic_name, 0)
    lost = [i for i in range(600) if (i, bodies[0][i]) not in got]
    assert len(lost) == 1  # exactly the damaged record; every other one reads at its offset
    assert got == [(i, b) for i, b in enumerate(bodies[0]) if i not in lost]


def test_a_truncated_middle_segment_is_reported_at_start_up(
    make_cluster: Callable[..., LocalCluster], topic_name: str
) -> None:
    cluster = make_cluster(broker_config=SMALL_STORE)
    bodies = produce(cluster, topic_name, queues=1, per_queue=600)
    cluster.stop_broker("broker-a")
    segments = sorted((cluster.data_dir / "broker-a" / "commitlog").iterdir())
    os.truncate(segments[1], 1000)
    cluster.start_broker("broker-a")

    log = (cluster.data_dir / "broker-a.log").read_text()
    assert f"commit-log segment {segments[1].name} is 1000 bytes" in log
    assert "store recovery cut" in log and "tombstones for records lost mid-queue" in log
    got = read_queue(cluster, topic_name, 0)
    assert got and all(bodies[0][offset] == body for offset, body in got)  # the rest at their offsets
    assert got[-1][0] == 599


def test_metadata_of_the_wrong_shape_stops_start_up_with_one_line(
    make_cluster: Callable[..., LocalCluster], topic_name: str
) -> None:
    cluster = make_cluster(broker_config=SMALL_STORE)
    produce(cluster, topic_name, queues=1, per_queue=5)
    cluster.stop_broker("broker-a")
    conf = cluster.data_dir / "broker-a.toml"
    topics = cluster.data_dir / "broker-a" / "config" / "topics.json"
    for content, field in (("[]", "Expected `object`, got `array`"), ('{"topics": [{"name": 7}]}', "$.topics[0]")):
        topics.write_text(content)
        run = subprocess.run(
            [sys.executable, "-m", "broker", "--conf", str(conf)], capture_output=True, text=True, timeout=60
        )
        assert run.returncode == 2
        last = run.stderr.strip().splitlines()[-1]
        assert last.startswith("broker: ") and "topics.json does not have the shape" in last and field in last


def test_a_missing_topics_file_is_rebuilt_and_offsets_are_never_reused(
    make_cluster: Callable[..., LocalCluster], topic_name: str
) -> None:
    cluster = make_cluster(broker_config=SMALL_STORE)
    bodies = produce(cluster, topic_name, queues=3, per_queue=30)
    cluster.stop_broker("broker-a")
    (cluster.data_dir / "broker-a" / "config" / "topics.json").unlink()
    (cluster.data_dir / "broker-a" / "config" / "topics.json.log").unlink(missing_ok=True)
    cluster.start_broker("broker-a")

    assert_all_readable(cluster, topic_name, bodies)
    with Producer(cluster.nameserver) as producer:
        assert producer.send(Message(topic_name, b"next", queue_id=2)).queue_offset == 30
    assert "was missing; rebuilt 1 topics from the consume queues" in (cluster.data_dir / "broker-a.log").read_text()
