"""The official RocketMQ 5 Python client's send rate against our v2 endpoint, as a ratio to the
same client against a do-nothing v2 server (``v2_echo_server.py``), in the same run.

The client (rocketmq-python-client) sends 100 B messages with its synchronous ``send`` from 1
and from 4 threads; each figure is the best of ``--rounds`` runs, taking turns between the two
servers. Our endpoint runs in a broker process (a LocalCluster of one broker) and relays each
message to the broker through our own client, as RocketMQ's proxy relays to its broker.
Target: at least 0.7x. Usage: ``python benchmarks/bench_grpc_v2.py [--messages N]``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rocketmq import ClientConfiguration, Credentials, Producer
from rocketmq import Message as V2Message

from rocketspark import Admin, LocalCluster, compiled

HERE = Path(__file__).resolve().parent
TOPIC = "bench-v2"
THREADS = (1, 4)


def start_echo() -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, str(HERE / "v2_echo_server.py")], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if " ready on " not in line:
        proc.kill()
        raise RuntimeError(f"v2 echo server did not start: {line!r}")
    return proc, line.rsplit(" ready on ", 1)[1].strip()


def send_rate(endpoint: str, messages: int, threads: int) -> float:
    producer = Producer(ClientConfiguration(endpoint, Credentials()), (TOPIC,))
    producer.startup()
    try:
        message = V2Message()
        message.topic, message.body = TOPIC, b"x" * 100
        for _ in range(20):  # connections, routes and settings in place
            producer.send(message)
        per_thread = messages // threads

        def work() -> None:
            for _ in range(per_thread):
                producer.send(message)

        workers = [threading.Thread(target=work) for _ in range(threads)]
        started = time.perf_counter()
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        return per_thread * threads / (time.perf_counter() - started)
    finally:
        producer.shutdown()


def main() -> None:
    compiled.require_fresh()  # the checkout's build, as the source is now
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    echo, echo_endpoint = start_echo()
    best: dict[tuple[str, int], float] = {}
    try:
        with LocalCluster(brokers=1, processes=True, broker_config={"auto_create_topic_enable": False}) as cluster:
            with Admin(cluster.nameserver) as admin:
                admin.create_topic(TOPIC, queues=4)
            targets = {"do-nothing v2 server": echo_endpoint, "rocketspark": cluster.grpc_endpoint}
            for round_n in range(args.rounds):
                order = list(targets.items()) if round_n % 2 == 0 else list(reversed(targets.items()))
                for label, endpoint in order:
                    for threads in THREADS:
                        rate = send_rate(endpoint, args.messages, threads)
                        best[(label, threads)] = max(best.get((label, threads), 0.0), rate)
                        print(f"round {round_n + 1} {label:<22} {threads} thread(s): {rate:>8,.0f} msg/s", flush=True)
    finally:
        echo.terminate()
        echo.wait(10)
    print(f"\nofficial Python client (rocketmq-python-client), synchronous send of 100 B, best of {args.rounds}")
    print(f"{'threads':>8} {'do-nothing server':>18} {'rocketspark':>12} {'ratio':>6}")
    for threads in THREADS:
        ceiling, ours = best[("do-nothing v2 server", threads)], best[("rocketspark", threads)]
        print(f"{threads:>8} {ceiling:>18,.0f} {ours:>12,.0f} {ours / ceiling:>6.2f}")
    print("target: ratio >= 0.7")


if __name__ == "__main__":
    main()
