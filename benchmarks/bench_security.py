"""Security benchmark: what users, permissions and TLS cost, as a ratio to security off.

Two clusters run side by side on this machine (one broker each, separate processes, async
flush): one with security off, one with ``auth_enable`` and TLS on every port. The secured
one is used by a normal user whose policies (Pub and Sub on ``Topic:bench-*``) are checked on
every request, over TLS. For 100 B bodies, alternating between the two clusters so that a
slow spell of the machine falls on both:

- ingest: ``Producer.send_batch`` of 1,000-message batches from 4 threads, msgs/s; and of
  10-message batches, where what each request costs (its signature and policy check, TLS
  records) weighs a hundred times more per message;
- drain: every message read back from offset 0 with ``Consumer.iter_range``, into Arrow
  columns and into Message objects, msgs/s.

Each figure is the best of ``--rounds`` runs; the ratio is secured / off (target: at least
0.85x for ingest and drain). Throughput here swings by 15 % from run to run, so the CPU time
each message costs (the broker's process and this client's, summed over every round) is
printed too: it says what security costs even when the machine is noisy.

Usage: ``python benchmarks/bench_security.py [--messages N] [--rounds R]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_broker import QUEUES, cpu_calibration, drain, ingest_broker

from rocketspark import Admin, LocalCluster, Message, compiled

BATCH = 1000
USER, SECRET = "bench", "bench-" + os.urandom(8).hex()


def prepare(cluster: LocalCluster, topics: list[str]) -> dict[str, Any]:
    """The topics, and (secured) a normal user allowed to use them: the client keywords."""
    with Admin(cluster.nameserver, **cluster.client_options) as admin:
        for topic in topics:
            admin.create_topic(topic, queues=QUEUES)
        if not cluster.auth:
            return {}
        admin.create_user(USER, SECRET)
        admin.set_acl(USER, "Topic:bench-*", ["Pub", "Sub"])
    return {"access_key": USER, "secret_key": SECRET, "tls": True, "tls_ca_file": cluster.tls_ca_file}


SMALL = 10
FIGURES = ("ingest", f"ingest, {SMALL}-message batches", "drain, Arrow columns", "drain, Message objects")


def measure(what: str, nameserver: str, topic: str, messages: int, client: dict[str, Any]) -> tuple[float, int]:
    """msgs/s of one figure, and the messages it moved: ``messages`` sent in batches (small
    ones to a topic of their own), or ``topic`` drained."""
    body = b"x" * 100
    if what == "ingest":
        return ingest_broker(nameserver, [Message(topic, body)] * BATCH, messages // BATCH, **client), messages
    if what.startswith("ingest"):
        small = [Message(topic + "-small", body)] * SMALL
        return ingest_broker(nameserver, small, messages // SMALL // 10, **client), messages // 10
    return drain(nameserver, topic, columnar=what == "drain, Arrow columns", **client)


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    compiled.require_fresh()  # the checkout's build, as the source is now
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=400_000, help="messages per ingest run (default 400000)")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    calibration = cpu_calibration()
    best: dict[tuple[str, str], float] = {}
    cpu: dict[tuple[str, str], list[float]] = {}  # (what, label) -> [broker s, client s, messages]
    config = {"auto_create_topic_enable": False}
    with (
        LocalCluster(brokers=1, processes=True, broker_config=config) as plain,
        LocalCluster(brokers=1, processes=True, broker_config=config, auth=True, tls=True) as secured,
    ):
        topics = [f"bench-{n}" for n in range(args.rounds)]
        topics += [f"{topic}-small" for topic in topics]
        clients = {"off": (plain, prepare(plain, topics)), "on": (secured, prepare(secured, topics))}
        for round_n, topic in enumerate(topics[: args.rounds]):
            for label, (cluster, client) in clients.items() if round_n % 2 == 0 else reversed(clients.items()):
                broker = cluster.broker_pid("broker-a")
                assert broker is not None
                for what in FIGURES:
                    before = (process_cpu_s(broker), time.process_time())
                    rate, moved = measure(what, cluster.nameserver, topic, args.messages, client)
                    spent = cpu.setdefault((what, label), [0.0, 0.0, 0.0])
                    spent[0] += process_cpu_s(broker) - before[0]
                    spent[1] += time.process_time() - before[1]
                    spent[2] += moved
                    best[(what, label)] = max(best.get((what, label), 0.0), rate)
                    print(f"round {round_n + 1} security {label:>3}: {what:<28} {rate:>12,.0f} msg/s", flush=True)

    print(
        f"\nrocketspark security benchmark: {args.messages:,} msgs of 100 B per ingest run in batches of {BATCH} "
        f"({args.messages // 10:,} in batches of {SMALL}), "
        f"best of {args.rounds} rounds; security on = auth_enable (a normal user, its policies checked on every "
        "request) and TLS on every port"
    )
    print(f"{'msg/s':<28} {'security off':>14} {'security on':>14} {'ratio':>6}")
    for what in FIGURES:
        off, on = best[(what, "off")], best[(what, "on")]
        print(f"{what:<28} {off:>14,.0f} {on:>14,.0f} {on / off:>6.2f}")
    print(f"\n{'CPU us per message':<28} {'off: broker':>12} {'client':>8} {'on: broker':>12} {'client':>8}")
    for what in FIGURES:
        used_off, used_on = (cpu[(what, label)] for label in ("off", "on"))
        per = [
            1e6 * used_off[0] / used_off[2],
            1e6 * used_off[1] / used_off[2],
            1e6 * used_on[0] / used_on[2],
            1e6 * used_on[1] / used_on[2],
        ]
        print(f"{what:<28} {per[0]:>12.2f} {per[1]:>8.2f} {per[2]:>12.2f} {per[3]:>8.2f}")
    print("target: ratio >= 0.85 for ingest and drain")
    print(f"machine speed: a 5M-iteration Python loop took {calibration:.2f} s (about 0.25 s on a quiet machine)")


if __name__ == "__main__":
    main()
