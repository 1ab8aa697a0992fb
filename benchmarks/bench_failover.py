"""Failover benchmark, with the default settings: how fast a replica group moves on, and that
it does not move when nothing failed.

Real processes on this machine: one group of 3 replicas with ``in_sync_replicas = 2`` and
every other key at its default (heartbeats every 500 ms, the controller's 3 s timeout, a 2 s
master lease). Producers send steadily, one message per send, each waiting for its
acknowledgement.

- **kill**: the master is SIGKILLed; seconds from the kill to the first acknowledgement of a
  send started after it, for each of ``--kills`` kills (the killed replica is restarted and
  the group waits to be whole between kills). Target: median at most 4 s.
- **pause**: the master is SIGSTOPped (it hangs with its connections open, as a frozen
  machine); seconds from the pause to the first acknowledgement of a send started after it,
  for each of ``--pauses`` pauses (then it is resumed: it finds itself deposed and rejoins).
  Target: at most the kill target.
- **no false failover**: ``--load-seconds`` (300) of full load on both cores, batches from
  four producer threads plus single sends, while a Spark streaming query (local[2]) reads the
  topic on the same machine; the number of elections in that time, read from the master epoch
  (target: 0). A false failover is worse than a slow one: this figure matters more.

Usage: ``python benchmarks/bench_failover.py [--kills 5] [--pauses 3] [--load-seconds 300]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rocketspark import Admin, LocalCluster, Message, Producer, compiled
from rocketspark.errors import RocketSparkError

TOPIC = "failover"
TARGET_S = 4.0
SENDERS = 4


def group(cluster: LocalCluster):  # type: ignore[no-untyped-def]
    with Admin(cluster.nameserver) as admin:
        return admin.replica_groups()["broker-a"]


def wait_whole(cluster: LocalCluster, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            view = group(cluster)
            if view.master and len(view.sync_state_set) == 3:
                return
        except (RocketSparkError, KeyError):
            pass
        if time.monotonic() > deadline:
            raise RuntimeError("the group did not become whole again (3 in-sync replicas)")
        time.sleep(0.1)


class Senders:
    """Threads sending one message at a time; ``first_ack_after(t)`` is when the first send
    started at or after ``t`` was acknowledged."""

    def __init__(self, nameserver: str, threads: int = SENDERS) -> None:
        self.acks: list[tuple[float, float]] = []  # (send started, acknowledged), monotonic
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.workers = [threading.Thread(target=self._run, args=(nameserver,), daemon=True) for _ in range(threads)]
        for worker in self.workers:
            worker.start()

    def _run(self, nameserver: str) -> None:
        with Producer(nameserver, send_timeout_ms=3000) as producer:
            while not self.stop.is_set():
                started = time.monotonic()
                try:
                    producer.send(Message(TOPIC, b"m" * 100))
                except RocketSparkError:
                    time.sleep(0.01)
                    continue
                with self.lock:
                    self.acks.append((started, time.monotonic()))
                time.sleep(0.005)

    def first_ack_after(self, t: float, timeout_s: float = 60) -> float:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self.lock:
                done = [acked for started, acked in self.acks if started >= t]
            if done:
                return min(done)
            time.sleep(0.01)
        raise RuntimeError(f"no send was acknowledged within {timeout_s:g} s")

    def close(self) -> None:
        self.stop.set()
        for worker in self.workers:
            worker.join(30)


def measure(
    cluster: LocalCluster, senders: Senders, rounds: int, act: Callable[[str], None], undo: Callable[[str], object]
) -> list[float]:
    times = []
    for _ in range(rounds):
        wait_whole(cluster)
        senders.first_ack_after(time.monotonic())  # the load runs
        master = group(cluster).master
        assert master is not None
        act(master)
        at = time.monotonic()
        times.append(senders.first_ack_after(at) - at)
        undo(master)
    wait_whole(cluster)
    return times


def failovers(kills: int, pauses: int) -> tuple[list[float], list[float]]:
    with LocalCluster(brokers=1, replicas=3, processes=True, broker_config={"in_sync_replicas": 2}) as cluster:
        wait_whole(cluster)
        with Admin(cluster.nameserver) as admin:
            admin.create_topic(TOPIC, queues=4)
        time.sleep(1.5)  # the slaves copy the new topic's config (every ha_metadata_interval_ms)
        senders = Senders(cluster.nameserver)
        try:
            killed = measure(cluster, senders, kills, cluster.kill, cluster.restart)
            paused = measure(cluster, senders, pauses, cluster.pause, cluster.resume)
        finally:
            senders.close()
    return killed, paused


def loaded_run(seconds: float) -> tuple[int, int, int]:
    """(elections, messages sent, Spark rows read) over ``seconds`` of full load."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    with LocalCluster(brokers=1, replicas=3, processes=True, broker_config={"in_sync_replicas": 2}) as cluster:
        wait_whole(cluster)
        with Admin(cluster.nameserver) as admin:
            admin.create_topic(TOPIC, queues=4)
        time.sleep(1.5)
        epoch = group(cluster).epoch
        spark = (
            SparkSession.builder.master("local[2]")
            .appName("rocketspark-bench-failover")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("OFF")
        rows = spark.sparkContext.accumulator(0)
        query = (
            spark.readStream.format("rocketmq")
            .option("nameserver", cluster.nameserver)
            .option("topic", TOPIC)
            .option("startingOffsets", "earliest")
            .load()
            .writeStream.foreachBatch(lambda df, _id: rows.add(df.count()))
            .option("checkpointLocation", tempfile.mkdtemp(prefix="bench-failover-cp-"))
            .trigger(processingTime="500 milliseconds")
            .start()
        )
        stop = threading.Event()
        sent = [0]

        def batches() -> None:
            batch = [Message(TOPIC, b"x" * 100) for _ in range(100)]
            with Producer(cluster.nameserver, send_timeout_ms=10_000) as producer:
                while not stop.is_set():
                    try:
                        producer.send_batch(batch)
                        sent[0] += len(batch)
                    except RocketSparkError:
                        time.sleep(0.05)

        workers = [threading.Thread(target=batches, daemon=True) for _ in range(4)]
        singles = Senders(cluster.nameserver, threads=2)
        for worker in workers:
            worker.start()
        time.sleep(seconds)
        stop.set()
        for worker in workers:
            worker.join(30)
        singles.close()
        query.stop()
        spark.stop()
        elections = group(cluster).epoch - epoch
        return elections, sent[0] + len(singles.acks), int(rows.value)


def main() -> None:
    compiled.require_fresh()  # the checkout's build, as the source is now
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument("--pauses", type=int, default=3)
    parser.add_argument("--load-seconds", type=float, default=300)
    args = parser.parse_args()

    killed, paused = failovers(args.kills, args.pauses) if args.kills or args.pauses else ([], [])
    print(f"\nfailover with default settings (3 replicas, in_sync_replicas = 2), {SENDERS} producer threads:")
    for what, times in (("master SIGKILLed", killed), ("master SIGSTOPped", paused)):
        if not times:
            continue
        median = statistics.median(times)
        verdict = "meets" if median <= TARGET_S and max(times) <= TARGET_S + 1 else "MISSES"
        print(
            f"  {what:<18} kill to first ack: {', '.join(f'{t:.2f}' for t in times)} s; median {median:.2f}, "
            f"worst {max(times):.2f} ({verdict} the target: median at most {TARGET_S:g} s)"
        )

    if args.load_seconds > 0:
        elections, sent, read = loaded_run(args.load_seconds)
        print(
            f"\nno false failover: {args.load_seconds:g} s of full load (4 batch producers, 2 single-send producers, "
            f"a Spark streaming query on local[2], all on this machine): {sent:,} messages sent, {read:,} read by "
            f"Spark; elections: {elections} ({'meets' if elections == 0 else 'MISSES'} the target: 0)"
        )


if __name__ == "__main__":
    main()
