"""Resilience benchmark: what the broker costs under pressure, on real processes.

Sections (each starts its own nameserver and broker processes and prints its figures):

- in-flight memory: 10 clients each send one 64 MiB batch at the same time; the broker's
  peak RSS (``VmHWM``) against the target of 600 MB, and how many of those requests the
  broker answered SYSTEM_BUSY (its ``max_inflight_request_bytes`` budget was full) and the
  producers retried after backing off.

Usage: ``python benchmarks/bench_resilience.py``. Linux only (reads ``/proc/<pid>/status``).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rocketspark import Admin, LocalCluster, Message, Producer

MiB = 1024 * 1024
RSS_TARGET_MB = 600


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


SECTIONS: list[Callable[[], None]] = [measure_inflight_rss]


def main() -> None:
    for section in SECTIONS:
        section()


if __name__ == "__main__":
    main()
