"""Broker benchmark: batched ingest, drain and produce-to-pull latency, against the wire's ceiling.

Starts a real nameserver and broker (separate processes, async flush) and a do-nothing server
of remoting frames (``echo_server.py``, on the same event loop the broker runs on), then for
100-byte and 1 KiB bodies measures:

- ingest: ``Producer.send_batch`` of 100- and 1,000-message batches from 4 threads, msgs/s;
  and the same batch records sent to the do-nothing server (the ceiling: what the transport
  and our client take), and our ratio to it;
- drain: reading every message back from offset 0 with ``Consumer.iter_range``, msgs/s, into
  Message objects and into Arrow columns (``columnar=True``);
- latency: one message a send at 1,000 and 10,000 msg/s offered (from one sending thread per
  500 sends/s, each waiting for its acknowledgements), and 10,000 msg/s as 10-message sends
  (1,000 sends/s, as a producer that batches does), received by a consumer in another process
  that follows the queue with a streaming pull from its end; the rate reached, p50 and p99
  in ms;
- one thread sending one message at a time, waiting for each acknowledgement, against a unary
  round trip to the do-nothing server;
- static topic: the drain rate of one logical queue whose data spans 3 segments on 2
  brokers, against a single-segment queue of the same size.

Usage: ``python benchmarks/bench_broker.py [--messages N] [--quick]``. Figures vary with the
machine's load; compare ratios measured in the same run.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rocketspark import Admin, Consumer, LocalCluster, Message, Producer, compiled
from rocketspark.codec import ids
from rocketspark.codec.build import encode_messages, with_first_id
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.remoting.client import RemotingClient

HERE = Path(__file__).resolve().parent
BATCH = 100
THREADS = 4
QUEUES = 4


def run_threads(total_batches: int, send: Callable[[], object]) -> float:
    """Send ``total_batches`` batches from THREADS threads; return elapsed seconds."""
    per_thread = total_batches // THREADS

    def work() -> None:
        for _ in range(per_thread):
            send()

    threads = [threading.Thread(target=work) for _ in range(THREADS)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - start


def start_echo() -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, str(HERE / "echo_server.py")], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if " ready on " not in line:
        proc.kill()
        raise RuntimeError(f"echo server did not start: {line!r}")
    return proc, line.rsplit(" ready on ", 1)[1].strip()


def ingest_echo(address: str, messages: list[Message], batches: int) -> float:
    """The ceiling: a do-nothing server receiving the same bytes over the same connection
    (each batch encoded once and resent: transport only)."""
    client = RemotingClient()
    topic = messages[0].topic
    request = RemotingCommand.request(
        RequestCode.SEND_BATCH_MESSAGE, {"topic": topic, "queueId": 0}, encode_messages(topic, messages)
    )

    def send() -> None:
        client.invoke(address, RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, request.ext, request.body))

    send()
    elapsed = run_threads(batches, send)
    client.close()
    return batches // THREADS * THREADS * len(messages) / elapsed


def ingest_broker(nameserver: str, messages: list[Message], batches: int, **client: Any) -> float:
    """``client``: security keywords (access_key, tls...) for a cluster with security on."""
    with Producer(nameserver, **client) as producer:
        producer.send_batch(messages)
        elapsed = run_threads(batches, lambda: producer.send_batch(messages))
    return batches // THREADS * THREADS * len(messages) / elapsed


def ingest_records(nameserver: str, messages: list[Message], batches: int, queues: int) -> float:
    """``ingest_broker`` with each batch record built once beforehand and sent with
    ``Producer.send_to_queue`` (as the Spark sink sends the records it builds from Arrow):
    what the broker takes, without the client encoding ``Message`` objects. Each send gets
    client ids of its own (``with_first_id``: one copy and CRC of the record, as the sink
    pays once per record it builds)."""
    topic = messages[0].topic
    record = encode_messages(topic, messages)
    with Producer(nameserver) as producer:
        sent = itertools.count()

        def send() -> None:
            fresh = with_first_id(record, ids.mint(len(messages)))
            producer.send_to_queue(topic, next(sent) % queues, fresh)

        send()
        elapsed = run_threads(batches, send)
    return batches // THREADS * THREADS * len(messages) / elapsed


def drain(nameserver: str, topic: str, *, columnar: bool = False, **client: Any) -> tuple[float, int]:
    """Read every message back from offset 0: as MessageExt objects, or as Arrow columns."""
    total = 0
    with Consumer(nameserver, **client) as consumer:
        start = time.perf_counter()
        for queue_id in range(len(consumer.queues(topic))):
            for result in consumer.iter_range(topic, queue_id, 0, batch=32_000, columnar=columnar):
                total += result.count
        elapsed = time.perf_counter() - start
    return total / elapsed, total


def one_at_a_time(nameserver: str, topic: str, count: int) -> float:
    """One thread sending one message at a time, waiting for each acknowledgement: msg/s."""
    with Producer(nameserver) as producer:
        producer.send(Message(topic, b"warm", queue_id=0))
        start = time.perf_counter()
        for i in range(count):
            producer.send(Message(topic, b"%08d" % i, queue_id=0))
        return count / (time.perf_counter() - start)


def echo_one_at_a_time(address: str, topic: str, count: int) -> float:
    """The ceiling of one_at_a_time: a unary round trip to the do-nothing server."""
    client = RemotingClient()
    body = encode_messages(topic, [Message(topic, b"00000000")])
    client.invoke(address, RemotingCommand.request(RequestCode.SEND_MESSAGE, {"topic": topic}, body))
    start = time.perf_counter()
    for _ in range(count):
        client.invoke(address, RemotingCommand.request(RequestCode.SEND_MESSAGE, {"topic": topic}, body))
    elapsed = time.perf_counter() - start
    client.close()
    return count / elapsed


def latency(
    nameserver: str, topic: str, size: int, count: int, rate: int = 1000, per_send: int = 1
) -> tuple[float, float, float]:
    """Produce-to-consume latency of ``rate`` msg/s offered as sends of ``per_send`` messages:
    the rate reached, p50 and p99 in ms."""
    with Consumer(nameserver) as probe:
        start_offset = probe.max_offset(topic, 0)
    consumer = subprocess.Popen(
        [sys.executable, str(HERE / "latency_consumer.py"), nameserver, topic, str(count), str(start_offset)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert consumer.stdout is not None
    consumer.stdout.readline()  # "consumer ready"
    time.sleep(0.5)
    padding = b"p" * max(0, size - 8)
    sends = count // per_send
    send_rate = rate / per_send
    senders = max(1, int(send_rate) // 500)  # each thread waits for every acknowledgement: 500/s each keeps up

    def send_share(k: int, producer: Producer) -> None:
        start = time.monotonic()
        for i in range(k, sends, senders):
            delay = start + i / send_rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            body = struct.pack(">q", time.monotonic_ns()) + padding
            if per_send == 1:
                producer.send(Message(topic, body, queue_id=0))
            else:
                producer.send_batch([Message(topic, body, queue_id=0)] * per_send)

    with Producer(nameserver) as producer:
        threads = [threading.Thread(target=send_share, args=(k, producer)) for k in range(senders)]
        began = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        reached = sends * per_send / (time.monotonic() - began)
    out, _ = consumer.communicate(timeout=120)
    samples = json.loads(out.strip().splitlines()[-1])
    samples = sorted(samples[len(samples) // 50 :])  # drop the first 2% as warm-up
    p50 = statistics.median(samples) / 1000
    p99 = samples[int(len(samples) * 0.99) - 1] / 1000
    return reached, p50, p99


def static_drain(messages_n: int, size: int = 100) -> tuple[float, float, int]:
    """Drain one logical queue whose data spans 3 segments on 2 brokers, and a single-segment
    queue of the same size, in the same run; return both rates and the segment count."""
    with LocalCluster(brokers=2, processes=True) as cluster:  # batches of BATCH
        ns = cluster.nameserver
        body = os.urandom(size)
        third = messages_n // 3
        with Admin(ns) as admin, Producer(ns) as producer:
            admin.create_topic("single", queues=1, brokers=["broker-a"])
            admin.create_static_topic("spanning", 1, brokers=["broker-a"])
            for _ in range(third * 3 // BATCH):
                producer.send_batch([Message("single", body, queue_id=0)] * BATCH)
            for broker in ("broker-b", "broker-a", None):
                for _ in range(third // BATCH):
                    producer.send_batch([Message("spanning", body, queue_id=0)] * BATCH)
                if broker:
                    admin.remap_static_topic("spanning", [0], broker)
            segments = len(admin.topic_status("spanning")[0].segments)
        single, _ = drain(ns, "single")
        spanning, _ = drain(ns, "spanning")
    return single, spanning, segments


def cpu_calibration() -> float:
    """Seconds for a fixed pure-Python loop: shows how fast this machine was during the run."""
    start = time.perf_counter()
    total = 0
    for i in range(5_000_000):
        total += i
    return time.perf_counter() - start


BATCH_SIZES = (100, 1000)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=600_000, help="messages per ingest run (default 600000)")
    parser.add_argument("--latency-messages", type=int, default=5000)
    parser.add_argument("--quick", action="store_true", help="a smaller, faster run")
    args = parser.parse_args()
    messages_n = 100_000 if args.quick else args.messages
    latency_n = 1500 if args.quick else args.latency_messages
    compiled.require_fresh()

    calibration = cpu_calibration()
    echo, echo_address = start_echo()
    ingest_rows, drain_rows, latency_rows = [], [], []
    try:
        with LocalCluster(brokers=1, processes=True) as cluster:
            ns = cluster.nameserver
            with Admin(ns) as admin:
                for size in (100, 1024):
                    for batch_n in BATCH_SIZES:
                        admin.create_topic(f"bench-{size}-{batch_n}", queues=QUEUES)
                    admin.create_topic(f"latency-{size}", queues=1)
                admin.create_topic("one-by-one", queues=1)
            for size in (100, 1024):
                body = os.urandom(size)
                for batch_n in BATCH_SIZES:
                    topic = f"bench-{size}-{batch_n}"
                    batch = [Message(topic, body) for _ in range(batch_n)]
                    batches = messages_n // batch_n
                    ceiling = ingest_echo(echo_address, batch, batches)
                    ours = ingest_broker(ns, batch, batches)
                    ingest_rows.append((size, batch_n, ours, ceiling))
                topic = f"bench-{size}-{BATCH_SIZES[-1]}"
                objects, _ = drain(ns, topic)
                columns, _ = drain(ns, topic, columnar=True)
                drain_rows.append((size, objects, columns))
                for rate, per_send in ((1000, 1), (10_000, 1), (10_000, 10)):
                    figures = latency(ns, f"latency-{size}", size, latency_n * per_send, rate, per_send)
                    latency_rows.append((size, rate, per_send, *figures))
            single = one_at_a_time(ns, "one-by-one", 3000)
            single_ceiling = echo_one_at_a_time(echo_address, "one-by-one", 3000)
        static_single, spanning, segments = static_drain(min(messages_n, 300_000))
    finally:
        echo.terminate()
        echo.wait(10)

    print(
        f"\nrocketspark broker benchmark ({messages_n:,} msgs per ingest run, {THREADS} sender threads, "
        "async flush, 1 broker)"
    )
    print(f"\nrocketspark's send path: {compiled.summary()}")
    print("\ningest (ceiling: a do-nothing server receiving the same batch records over the same connection)")
    print(f"{'body':>6} {'batch':>6} {'msg/s':>12} {'ceiling':>12} {'ratio':>6}")
    for size, batch_n, ours, ceiling in ingest_rows:
        print(f"{size:>5}B {batch_n:>6} {ours:>12,.0f} {ceiling:>12,.0f} {ours / ceiling:>6.2f}")
    print(f"\ndrain from offset 0 (batches of {BATCH_SIZES[-1]} as stored)")
    print(f"{'body':>6} {'Message objects':>16} {'Arrow columns':>14}")
    for size, objects, columns in drain_rows:
        print(f"{size:>5}B {objects:>16,.0f} {columns:>14,.0f}")
    print("\nproduce to consume latency (streaming pull in another process; msg/s offered and reached)")
    print(f"{'body':>6} {'offered':>8} {'per send':>8} {'reached':>8} {'p50 ms':>7} {'p99 ms':>7}")
    for size, rate, per_send, reached, p50, p99 in latency_rows:
        print(f"{size:>5}B {rate:>8,} {per_send:>8} {reached:>8,.0f} {p50:>7.2f} {p99:>7.2f}")
    print(
        f"\none thread, one message at a time, waiting for each acknowledgement: {single:,.0f} msg/s; a unary "
        f"round trip to the do-nothing server: {single_ceiling:,.0f}/s (ratio {single / single_ceiling:.2f})"
    )
    print(
        f"\nstatic topic: one logical queue over {segments} segments on 2 brokers drains at {spanning:,.0f} msg/s; "
        f"a single-segment queue at {static_single:,.0f} msg/s: ratio {spanning / static_single:.2f} (target >= 0.8)"
    )
    print(f"\nmachine speed: a 5M-iteration Python loop took {calibration:.2f} s (about 0.25 s on a quiet machine)")
    print(
        "\ntargets (100 B): ingest of 1,000-message batches >= 1,000,000 msg/s and >= 0.5x its ceiling; drain "
        ">= 2,000,000 msg/s as Arrow columns and >= 700,000 as Message objects; one at a time >= 3,000 msg/s; "
        "p99 <= 1 ms at 1,000 msg/s and <= 2 ms at 10,000 msg/s"
    )
    print(
        "reference (peer-baselines.md, this machine): Redis streams 100k ingest / 500k drain, "
        "JetStream 50k / 150k, p99 ~0.7 ms"
    )


if __name__ == "__main__":
    main()
