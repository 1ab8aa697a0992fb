"""What message trace costs and how fast a trace is found (issue 30).

On one broker process, two topics alike but for trace (``create_topic(..., trace=True)``):

- batched ingest: 1,000-message batches of 100-byte messages, sent for ``--seconds`` to the
  untraced topic, then the traced one, taking turns ``--rounds`` times (the medians are
  compared: target at least 0.8x with trace on);
- single sends: the same, one message a send;
- look-up: ``--messages`` messages (default 1,000,000) sent in batches to the traced topic and
  read once by a consumer (so each has sent, stored and delivered events), then
  ``Admin.message_trace`` of random ones, end to end (the message found by id, then its
  record's events through the broker's key index).

Usage: ``python benchmarks/bench_trace.py [--messages N] [--seconds S] [--rounds R]``.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rocketspark import Admin, Consumer, LocalCluster, Message, Producer, compiled
from rocketspark.errors import MessageNotFoundError
from rocketspark.protocol.types import SendResult

OFF, ON, LOOKUP = "bench-trace-off", "bench-trace-on", "bench-trace-lookup"
BATCH = 1000
BODY = b"x" * 100


def batched(producer: Producer, topic: str, seconds: float) -> float:
    """Messages a second sent in 1,000-message batches for ``seconds``."""
    batch = [Message(topic, BODY) for _ in range(BATCH)]
    sent, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        sent += sum(r.count for r in producer.send_batch(batch))
    return sent / (time.perf_counter() - started)


def single(producer: Producer, topic: str, seconds: float) -> float:
    """Messages a second sent one a send for ``seconds``."""
    message = Message(topic, BODY)
    sent, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        producer.send(message)
        sent += 1
    return sent / (time.perf_counter() - started)


def turns(name: str, run: Callable[[str], float], rounds: int) -> None:
    """Off and on in turns; the medians and their ratio."""
    rates: dict[str, list[float]] = {OFF: [], ON: []}
    for _ in range(rounds):
        for topic in (OFF, ON):
            rates[topic].append(run(topic))
    off, on = statistics.median(rates[OFF]), statistics.median(rates[ON])
    each = ", ".join(f"{a:,.0f}/{b:,.0f}" for a, b in zip(rates[OFF], rates[ON], strict=True))
    verdict = "" if name != "batched ingest" else f" (target >= 0.8x: {'met' if on >= 0.8 * off else 'NOT met'})"
    print(f"{name:<16} off {off:12,.0f} msg/s   on {on:12,.0f} msg/s   on/off {on / off:5.2f}x{verdict}")
    print(f"{'':<16} rounds off/on: {each}")


def fill(ns: str, messages: int) -> list[SendResult]:
    """``messages`` to the look-up topic in batches, then read once by a consumer."""
    started = time.perf_counter()
    sent: list[SendResult] = []
    with Producer(ns) as producer:
        for first in range(0, messages, BATCH):
            count = min(BATCH, messages - first)
            sent += producer.send_batch([Message(LOOKUP, BODY) for _ in range(count)])
    took = time.perf_counter() - started
    print(f"{messages:,} messages sent to the traced topic in {took:.1f} s ({messages / took:,.0f} msg/s)")
    started = time.perf_counter()
    read = 0
    with Consumer(ns) as consumer:
        for queue in consumer.queues(LOOKUP):
            offset = 0
            while True:
                result = consumer.pull(LOOKUP, queue.queue_id, offset, 32_768)
                if not result.messages:
                    break
                read += len(result.messages)
                offset = result.next_offset
    print(f"  read back by a consumer: {read:,} messages in {time.perf_counter() - started:.1f} s")
    return sent


def traced(admin: Admin, msg_id: str, timeout_s: float = 600) -> list[object]:
    """The message's trace once it shows delivery (events are indexed a second or so late)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            events = admin.message_trace(msg_id)
        except MessageNotFoundError:
            events = []
        if any(e.event == "delivered" for e in events):
            return list(events)
        time.sleep(0.2)
    raise RuntimeError(f"no delivered event for {msg_id} within {timeout_s} s")


def lookup(admin: Admin, sent: list[SendResult], count: int) -> None:
    picked = [random.choice(sent) for _ in range(count)]
    ids = [r.msg_ids()[random.randrange(r.count)] for r in picked]
    started = time.monotonic()
    traced(admin, sent[-1].msg_ids()[-1])
    print(f"  the last message's trace complete {time.monotonic() - started:.1f} s after it was read")
    times = []
    for msg_id in ids:
        began = time.perf_counter()
        events = admin.message_trace(msg_id)
        times.append((time.perf_counter() - began) * 1000)
        assert {"sent", "stored", "delivered"} <= {e.event for e in events}, events
    p99 = sorted(times)[max(0, int(len(times) * 0.99) - 1)]
    print(
        f"Admin.message_trace of one message among {sum(r.count for r in sent):,} ({count} random ones): "
        f"median {statistics.median(times):.2f} ms, p99 {p99:.2f} ms"
    )


def main() -> None:
    compiled.require_fresh()  # the checkout's build, as the source is now
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=1_000_000, help="messages the look-up is made among")
    parser.add_argument("--seconds", type=float, default=3.0, help="length of one rate measurement")
    parser.add_argument("--rounds", type=int, default=3, help="turns of off and on")
    parser.add_argument("--lookups", type=int, default=100)
    args = parser.parse_args()
    with LocalCluster(brokers=1, processes=True) as cluster, Admin(cluster.nameserver) as admin:
        admin.create_topic(OFF, 4)
        admin.create_topic(ON, 4, trace=True)
        admin.create_topic(LOOKUP, 4, trace=True)
        with Producer(cluster.nameserver) as producer:
            batched(producer, OFF, 1.0)  # warm up: connections, routes
            batched(producer, ON, 1.0)
            turns("batched ingest", lambda t: batched(producer, t, args.seconds), args.rounds)
            turns("single sends", lambda t: single(producer, t, args.seconds), args.rounds)
        lookup(admin, fill(cluster.nameserver, args.messages), args.lookups)


if __name__ == "__main__":
    main()
