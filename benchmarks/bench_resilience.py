"""Resilience benchmark: what the broker costs under pressure, on real processes.

Sections (each starts its own nameserver and broker processes and prints its figures):

- in-flight memory: 10 clients each send one 64 MiB batch at the same time; the broker's
  peak RSS (``VmHWM``) against the target of 600 MB, and how many of those requests the
  broker answered SYSTEM_BUSY (its ``max_inflight_request_bytes`` budget was full) and the
  producers retried after backing off.

- topic creation: 10,000 topics created one after another; the time of the last 1,000
  against the first 1,000 (target: at most 1.2x).
- restart: a broker holding 10,000 queues (1,250 topics x 8, a message each) stopped and
  started again; seconds from the start command to its readiness line (target: at most 5 s).

Usage: ``python benchmarks/bench_resilience.py``. Linux only (reads ``/proc/<pid>/status``).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rocketspark import Admin, LocalCluster, Message, Producer, compiled

MiB = 1024 * 1024
RSS_TARGET_MB = 600
TOPIC_RATIO_TARGET = 1.2
RESTART_TARGET_S = 5.0


def proc_status_mb(pid: int, field: str) -> float:
    """A ``/proc/<pid>/status`` memory field (``VmHWM``: peak RSS, ``VmRSS``: now) in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024 / 1e6  # the kernel reports kB
    raise RuntimeError(f"/proc/{pid}/status has no {field}")


def send_concurrently(nameserver: str, topic: str, clients: int, batch_mib: int) -> tuple[float, list[str]]:
    """Each of ``clients`` threads sends one ``batch_mib`` MiB batch (1 MiB messages, one
    request) with its own Producer, all released at once; return the seconds and errors."""
    batch = [Message(topic, b"x" * MiB) for _ in range(batch_mib)]
    errors: list[str] = []
    producers = [
        Producer(nameserver, send_timeout_ms=120_000, batch_max_bytes=(batch_mib + 1) * MiB) for _ in range(clients)
    ]
    for producer in producers:
        producer.publish_info(topic)  # the route is cached before the clock starts
    gate = threading.Barrier(clients)

    def send(producer: Producer) -> None:
        gate.wait()
        try:
            [result] = producer.send_batch(batch)
            assert result.count == batch_mib
        except Exception as exc:  # reported below: one failed client must not hide the figures
            errors.append(f"{type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=send, args=(p,)) for p in producers]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - started
    for producer in producers:
        producer.close()
    return elapsed, errors


def measure_inflight_rss(clients: int = 10, batch_mib: int = 64) -> None:
    """Peak broker RSS while ``clients`` batches of ``batch_mib`` MiB arrive at once."""
    with LocalCluster(brokers=1, processes=True, broker_config={"segment_bytes": 256 * MiB}) as cluster:
        pid = cluster.broker_pid("broker-a")
        assert pid is not None
        with Admin(cluster.nameserver) as admin:
            admin.create_topic("inflight", queues=4)
            before_mb = proc_status_mb(pid, "VmHWM")
            elapsed, errors = send_concurrently(cluster.nameserver, "inflight", clients, batch_mib)
            peak_mb = proc_status_mb(pid, "VmHWM")
            counters = admin.broker_counters("broker-a")
    busy = counters.get("systemBusy", "n/a (not counted by this broker)")
    verdict = "meets" if peak_mb < RSS_TARGET_MB else "MISSES"
    print(f"\nin-flight memory: {clients} concurrent {batch_mib} MiB batches, 1 broker")
    print(f"  broker peak RSS {peak_mb:,.0f} MB ({verdict} the target: under {RSS_TARGET_MB} MB)")
    print(f"  broker RSS before the sends: {before_mb:,.0f} MB")
    print(f"  requests answered SYSTEM_BUSY and retried: {busy}")
    print(f"  all {clients} batches stored in {elapsed:.1f} s" if not errors else f"  {len(errors)} sends failed:")
    for error in errors:
        print(f"    {error}")


def measure_topic_creation(total: int = 10_000, block: int = 1_000) -> None:
    """Create ``total`` topics one by one through the admin client (broker, then nameserver
    registration); the last ``block`` against the first shows whether a topic's cost grows
    with the number of topics (target: at most 1.2x)."""
    config = {"auto_create_topic_enable": False}
    with LocalCluster(brokers=1, processes=True, broker_config=config) as cluster, Admin(cluster.nameserver) as admin:
        blocks: list[float] = []
        for b in range(total // block):
            started = time.perf_counter()
            for i in range(block):
                admin.create_topic(f"t{b * block + i:05d}", queues=1)
            blocks.append(time.perf_counter() - started)
    ratio = blocks[-1] / blocks[0]
    verdict = "meets" if ratio <= TOPIC_RATIO_TARGET else "MISSES"
    print(f"\ntopic creation: {total:,} topics, one create-topic call each, 1 broker")
    print(f"  total {sum(blocks):.1f} s; per {block:,}: " + ", ".join(f"{t:.2f}" for t in blocks) + " s")
    print(f"  last {block:,} / first {block:,}: {ratio:.2f}x ({verdict} the target: at most {TOPIC_RATIO_TARGET}x)")


def measure_restart(topics: int = 1_250, queues: int = 8) -> None:
    """Restart a broker whose store holds ``topics`` x ``queues`` queues with a message each:
    from the start command to its readiness line (a new Python process included)."""
    with LocalCluster(brokers=1, processes=True, broker_config={"auto_create_topic_enable": False}) as cluster:
        with Admin(cluster.nameserver) as admin:
            for i in range(topics):
                admin.create_topic(f"r{i:05d}", queues=queues)
        with Producer(cluster.nameserver) as producer:
            for i in range(topics):
                producer.send_batch([Message(f"r{i:05d}", b"x" * 100, queue_id=q) for q in range(queues)])
        cluster.stop_broker("broker-a")
        started = time.perf_counter()
        cluster.start_broker("broker-a")
        restart_s = time.perf_counter() - started
        with Admin(cluster.nameserver) as admin:  # and the queues answer after it
            started = time.perf_counter()
            for i in range(topics):
                assert [q.max_offset for q in admin.topic_status(f"r{i:05d}")] == [1] * queues
            first_use_s = time.perf_counter() - started
        cluster.kill_broker("broker-a")  # a crash: recovery cuts and re-indexes every queue
        started = time.perf_counter()
        cluster.start_broker("broker-a")
        crash_s = time.perf_counter() - started
    verdict = "meets" if restart_s <= RESTART_TARGET_S else "MISSES"
    print(f"\nrestart: {topics * queues:,} queues ({topics:,} topics x {queues}), one message each")
    print(
        f"  after a clean stop: start to ready {restart_s:.2f} s ({verdict} the target: at most {RESTART_TARGET_S:g} s)"
    )
    print(
        f"  then the first use of every queue (loaded and checked lazily): {first_use_s:.2f} s ({topics:,} topic stats)"
    )
    print(f"  after a SIGKILL (queues written since the checkpoint re-indexed): start to ready {crash_s:.2f} s")


SECTIONS: list[Callable[[], None]] = [measure_inflight_rss, measure_topic_creation, measure_restart]


def main() -> None:
    compiled.require_fresh()  # the checkout's build, as the source is now
    for section in SECTIONS:
        section()


if __name__ == "__main__":
    main()
