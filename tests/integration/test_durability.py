"""A broker killed with SIGKILL mid-load keeps every acknowledged message, in order."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from rocketspark import Admin, Consumer, LocalCluster, Message, Producer, RocketSparkError
from tests.helpers import eventually

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_every_acknowledged_message_survives_sigkill_with_the_same_offsets(
    make_cluster: Callable[..., LocalCluster], topic_name: str
) -> None:
    cluster = make_cluster(
        brokers=1, broker_config={"flush_mode": "sync", "segment_bytes": 1 << 20, "max_message_bytes": 64 * 1024}
    )
    ns = cluster.nameserver
    with Admin(ns) as admin:
        admin.create_topic(topic_name, queues=2)
    acked: list[tuple[int, int, bytes]] = []  # (queue, offset, body) in acknowledgement order
    per_worker = [0, 0, 0]  # messages acknowledged to each worker
    unexpected: list[str] = []  # a worker that stopped for any reason but the kill
    stop = threading.Event()
    killed = threading.Event()

    def produce(worker: int) -> None:
        try:
            with Producer(ns, retry_times_when_send_failed=0, send_timeout_ms=2000) as producer:
                i = 0
                while not stop.is_set():
                    body = f"w{worker}-{i:06d}".encode() * 8
                    try:
                        if i % 10 == 0:
                            results = producer.send_batch([Message(topic_name, body + bytes([k])) for k in range(5)])
                            assert len(results) == 1  # five small messages: one request, numbered from its offset
                            r = results[0]
                            acked.extend((r.queue_id, r.queue_offset + k, body + bytes([k])) for k in range(r.count))
                            per_worker[worker] += r.count
                        else:
                            r = producer.send(Message(topic_name, body))
                            acked.append((r.queue_id, r.queue_offset, body))
                            per_worker[worker] += 1
                    except RocketSparkError as exc:
                        if not killed.is_set():
                            unexpected.append(f"worker {worker} failed before the kill: {exc!r}")
                        return  # the broker is gone: whatever was not acknowledged may be lost
                    i += 1
        except BaseException as exc:
            unexpected.append(f"worker {worker} died: {exc!r}")

    def every_worker_is_busy() -> bool:
        if unexpected:
            pytest.fail("; ".join(unexpected))  # at once, not after the timeout
        return min(per_worker) >= 500

    workers = [threading.Thread(target=produce, args=(w,)) for w in range(3)]
    for w in workers:
        w.start()
    eventually(every_worker_is_busy, timeout_s=60)  # all three are sending when the broker dies
    killed.set()
    cluster.kill_broker("broker-a")  # SIGKILL while sends are in flight
    stop.set()
    for w in workers:
        w.join(30)
    assert not any(w.is_alive() for w in workers)
    assert not unexpected, unexpected

    cluster.start_broker("broker-a")  # same data directory, same port
    with Consumer(ns) as consumer:
        stored: dict[int, dict[int, bytes]] = {}
        for queue_id in (0, 1):
            stored[queue_id] = {
                m.queue_offset: m.body for r in consumer.iter_range(topic_name, queue_id, 0) for m in r.messages
            }
    for queue_id, offset, body in acked:
        assert stored[queue_id].get(offset) == body, f"acknowledged message lost at {queue_id}/{offset}"
    for queue_id in (0, 1):
        offsets = sorted(stored[queue_id])
        assert offsets == list(range(len(offsets)))  # dense, in order, no gaps
    log = (cluster.data_dir / "broker-a.log").read_text()
    assert "store recovery after a crash" in log


def test_a_clean_restart_reports_a_clean_stop(make_cluster: Callable[..., LocalCluster], topic_name: str) -> None:
    cluster = make_cluster(brokers=1)
    with Admin(cluster.nameserver) as admin:
        admin.create_topic(topic_name, queues=1)
    with Producer(cluster.nameserver) as producer:
        producer.send_batch([Message(topic_name, b"x")] * 100)
    cluster.stop_broker("broker-a")
    cluster.start_broker("broker-a")
    with Consumer(cluster.nameserver) as consumer:
        assert consumer.max_offset(topic_name, 0) == 100
    recoveries = [
        line for line in (cluster.data_dir / "broker-a.log").read_text().splitlines() if "store recovery" in line
    ]
    assert "after a clean stop" in recoveries[-1]
