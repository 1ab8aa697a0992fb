"""Store benchmark: recovery time after a SIGKILL, and the broker's memory with a large log.

Real broker process (async flush) on this machine's disk:

- recovery: fill 1 GiB of log (1 KiB bodies in 1,000-message batches), SIGKILL the broker,
  start it again and time it to serving (the restart returns once the broker answers), and to
  the first message read back. The broker runs with a checkpoint interval of an hour, so the
  restart recovers all of it: every record's CRCs checked and every queue re-indexed, the
  worst case (target: at most 5 s). The ceiling printed next to it is a cold read of the same
  bytes with ``zlib.crc32`` in one process: what checking them costs at least;
- memory: keep filling to 10 GiB and print the broker's resident set size (``VmRSS``) then and
  after reading the newest GiB back (target: at most 300 MB).

Usage: ``python benchmarks/bench_store.py [--recovery-gib G] [--rss-gib G]``. Needs about
``--rss-gib`` of free disk.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rocketspark import Admin, Consumer, LocalCluster, Message, Producer, compiled

GiB = 1 << 30
BODY = 1024
BATCH = 1000
QUEUES = 4
THREADS = 4


def fill(nameserver: str, topic: str, nbytes: int) -> float:
    """Send about ``nbytes`` of bodies; return MB/s."""
    batches = [[Message(topic, os.urandom(BODY), queue_id=q)] * BATCH for q in range(QUEUES)]
    per_thread = max(1, nbytes // (BODY * BATCH) // THREADS)

    def work(k: int) -> None:
        with Producer(nameserver) as producer:
            for i in range(per_thread):
                producer.send_batch(batches[(i + k) % QUEUES])

    threads = [threading.Thread(target=work, args=(k,)) for k in range(THREADS)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return per_thread * THREADS * BATCH * BODY / (time.perf_counter() - start) / 1e6


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def crc_ceiling(commitlog: Path) -> float:
    """Seconds to read every segment and CRC it, after dropping it from this process's view."""
    start = time.perf_counter()
    for path in sorted(commitlog.iterdir()):
        with open(path, "rb") as f:
            while chunk := f.read(8 << 20):
                zlib.crc32(chunk)
    return time.perf_counter() - start


def main() -> None:
    compiled.require_fresh()  # the checkout's build, as the source is now
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--recovery-gib", type=float, default=1.0)
    parser.add_argument("--rss-gib", type=float, default=10.0)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="rocketspark-store-bench-"))
    config = {"checkpoint_interval_ms": 3_600_000, "auto_create_topic_enable": False}
    with LocalCluster(brokers=1, processes=True, data_dir=work, broker_config=config) as cluster:
        ns = cluster.nameserver
        with Admin(ns) as admin:
            admin.create_topic("log", queues=QUEUES)
        rate = fill(ns, "log", int(args.recovery_gib * GiB))
        cluster.kill_broker("broker-a")
        killed = time.perf_counter()
        cluster.start_broker("broker-a")
        serving = time.perf_counter() - killed
        with Consumer(ns) as consumer:
            first = consumer.pull("log", 0, 0, max_messages=1)
        readable = time.perf_counter() - killed
        assert first.messages, "nothing readable after recovery"
        recovery_line = next(
            (line for line in (work / "broker-a.log").read_text().splitlines()[::-1] if "store recovery" in line), ""
        )
        ceiling = crc_ceiling(work / "broker-a" / "commitlog")

        fill(ns, "log", int((args.rss_gib - args.recovery_gib) * GiB))
        pid = cluster.broker_pid("broker-a")
        assert pid is not None
        full_rss = rss_mb(pid)
        with Consumer(ns) as consumer:
            high = consumer.max_offset("log", 0)
            start = max(0, high - int(GiB / QUEUES / BODY))
            read = sum(r.count for r in consumer.iter_range("log", 0, start, high, batch=32_000, columnar=True))
        read_rss = rss_mb(pid)
        log_bytes = sum(p.stat().st_size for p in (work / "broker-a" / "commitlog").iterdir())

    print(f"\nrocketspark store benchmark (1 broker, {BODY} B bodies, batches of {BATCH}, fill {rate:,.0f} MB/s)")
    print(
        f"\nrecovery of {args.recovery_gib:g} GiB after SIGKILL, all of it re-checked: serving after {serving:.2f} s, "
        f"first message read after {readable:.2f} s (target: at most 5 s)"
    )
    print(f"  {recovery_line.split(': ', 1)[-1]}")
    print(f"  ceiling: reading and CRC-checking the same {args.recovery_gib:g} GiB in one process: {ceiling:.2f} s")
    print(
        f"\nbroker RSS with a {log_bytes / GiB:.1f} GiB log: {full_rss:.0f} MB; after reading {read:,} messages "
        f"(the newest ~{read * BODY / GiB:.2f} GiB of one queue) back: {read_rss:.0f} MB (target: at most 300 MB)"
    )


if __name__ == "__main__":
    main()
