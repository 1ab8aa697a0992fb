"""Replication benchmark: what a replica group costs, and how long a failover takes.

Real processes on this machine (2 cores: the replicas share them with the producers, so the
ratio is a lower bound of what separate machines give):

- ingest: ``Producer.send_batch`` of 100-message batches of 100 B from 4, 16 and 64 threads
  into one unreplicated broker, then into a 3-replica group with ``in_sync_replicas = 2``
  (every send waits for a slave's copy); msgs/s of each, and the ratio of the replicated
  group's best to the unreplicated broker's best, the ceiling (target: at least 0.6x),
  measured in the same run, each the best of 3 runs. A replicated send waits longer (a slave's copy), so it takes
  more sends in flight to keep the broker busy: with 4 the group idles between them;
- failover: the master of a 3-replica group is SIGKILLed under a steady trickle of sends;
  seconds from the kill to the first send acknowledged after it, median over 5 kills
  (target: at most the controller's heartbeat timeout + 1 s).

Usage: ``python benchmarks/bench_replication.py [--messages N] [--kills K]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_broker
from bench_broker import BATCH, ingest_broker

from rocketspark import Admin, LocalCluster, Message, Producer, compiled
from rocketspark.errors import RocketSparkError

HEARTBEAT_TIMEOUT_MS = 3000
NAMESERVER = {"controller_broker_heartbeat_timeout_ms": HEARTBEAT_TIMEOUT_MS}
REPLICA = {
    "controller_heartbeat_interval_ms": 300,
    "master_lease_ms": 2000,
    "ha_max_time_slave_not_catchup_ms": 3000,
    "auto_create_topic_enable": False,
}


def wait_for_sync_state_set(cluster: LocalCluster, size: int, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    with Admin(cluster.nameserver) as admin:
        while len(admin.replica_groups()["broker-a"].sync_state_set) < size:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the group did not reach {size} in-sync replicas")
            time.sleep(0.1)


THREAD_COUNTS = (4, 16, 64)
ROUNDS = 3  # each figure is the best of this many runs: the machine's noise is +-15 %


def replicated_ingest(messages_n: int) -> tuple[dict[int, float], dict[int, float]]:
    """msgs/s of the unreplicated broker and of the group with each of THREAD_COUNTS producer
    threads, best of ROUNDS. Both run side by side and take turns (the idle one costs ~1 % of a
    core), so a slow spell of the machine falls on both, not on whichever ran then."""
    config = {**REPLICA, "in_sync_replicas": 2}
    plain_config, ns = {"auto_create_topic_enable": False}, NAMESERVER
    with (
        LocalCluster(brokers=1, processes=True, broker_config=plain_config) as single,
        LocalCluster(brokers=1, replicas=3, processes=True, broker_config=config, nameserver_config=ns) as group,
    ):
        wait_for_sync_state_set(group, 3)
        clusters = (single, group)
        for cluster in clusters:
            with Admin(cluster.nameserver) as admin:
                admin.create_topic("bench", queues=8)
        messages = [Message("bench", b"x" * 100) for _ in range(BATCH)]
        rates = [dict.fromkeys(THREAD_COUNTS, 0.0), dict.fromkeys(THREAD_COUNTS, 0.0)]
        for _ in range(ROUNDS):
            for threads in THREAD_COUNTS:
                bench_broker.THREADS = threads
                for cluster, best in zip(clusters, rates, strict=True):
                    rate = ingest_broker(cluster.nameserver, messages, messages_n // BATCH)
                    best[threads] = max(best[threads], rate)
    return rates[0], rates[1]


def failover_times(kills: int) -> list[float]:
    config = {**REPLICA, "in_sync_replicas": 2}
    times: list[float] = []
    with LocalCluster(brokers=1, replicas=3, processes=True, broker_config=config, nameserver_config=NAMESERVER) as c:
        wait_for_sync_state_set(c, 3)
        with Admin(c.nameserver) as admin:
            admin.create_topic("failover", queues=1)
        with Producer(c.nameserver, send_timeout_ms=1000) as producer, Admin(c.nameserver) as admin:
            for _ in range(kills):
                producer.send(Message("failover", b"warm"))
                master = admin.replica_groups()["broker-a"].master
                assert master is not None
                c.kill(master)
                killed = time.monotonic()
                while True:
                    try:
                        producer.send(Message("failover", b"after"))
                        break
                    except RocketSparkError:
                        time.sleep(0.02)
                times.append(time.monotonic() - killed)
                c.restart(master)
                wait_for_sync_state_set(c, 3)
    return times


def main() -> None:
    compiled.require_fresh()  # the checkout's build, as the source is now
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--kills", type=int, default=5)
    args = parser.parse_args()

    plain, replicated = replicated_ingest(args.messages)
    ratio = max(replicated.values()) / max(plain.values())
    print(f"\ningest, 100 B, batches of {BATCH}, async flush (msg/s by producer threads, best of {ROUNDS}):")
    print("  threads                          " + "".join(f"{t:>12}" for t in THREAD_COUNTS))
    print("  unreplicated broker              " + "".join(f"{plain[t]:>12,.0f}" for t in THREAD_COUNTS))
    print("  3 replicas, in_sync_replicas = 2 " + "".join(f"{replicated[t]:>12,.0f}" for t in THREAD_COUNTS))
    print(
        f"  ratio of the bests {ratio:.2f} ({'meets' if ratio >= 0.6 else 'MISSES'} the target: at least 0.6); "
        f"at 4 threads {replicated[4] / plain[4]:.2f}"
    )

    times = failover_times(args.kills)
    median = statistics.median(times)
    target = HEARTBEAT_TIMEOUT_MS / 1000 + 1
    print(f"\nfailover, kill to the first acknowledged send, {args.kills} kills, heartbeat timeout 3 s:")
    print("  " + ", ".join(f"{t:.2f}" for t in times) + " s")
    print(f"  median {median:.2f} s ({'meets' if median <= target else 'MISSES'} the target: at most {target:g} s)")


if __name__ == "__main__":
    main()
