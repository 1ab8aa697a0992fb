"""RocketMQ 4.x client benchmark: ali-ons (npm; a pure JavaScript 4.x client) against
rocketspark, next to our own Producer and Consumer for the same messages, same run.

One broker process (async flush), one topic of 4 queues, 100-byte bodies with a tag:

1. produce, one message per send, each waiting for its answer (ali-ons' ``send`` is always
   that), from one client: msg/s of ali-ons (node, SEND_MESSAGE_V2 in JSON frames) and of our
   ``Producer.send`` (msgpack frames), and, for scale, our ``send_batch`` of 1,000 messages;
2. consume everything from the first offset: ali-ons' push consumer (pulls of 32 messages,
   MessageExt records made per message by the broker's 4.x dialect) against our ``Consumer``
   pulling the same messages (whole batch records, decoded as columns).

The ratios say what a 4.x client costs next to ours on the same broker; they are no target of
the issue, and both clients are limited differently (ali-ons by one request in flight and
node's single thread, ours by Python).

Usage: ``python benchmarks/bench_rocketmq4.py [--messages 20000]`` (installs ali-ons with npm
when missing).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rocketspark import Admin, Consumer, LocalCluster, Message, Producer, compiled

ALI_ONS = Path(__file__).resolve().parent.parent / "tests" / "ali_ons"
TOPIC = "bench4"
BODY = b"x" * 100


def install_ali_ons() -> None:
    if not (ALI_ONS / "node_modules" / "ali-ons").is_dir():
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=ALI_ONS, check=True)


def node(script: str, options: dict[str, object], timeout_s: float = 900) -> dict[str, object]:
    done = subprocess.run(
        ["node", str(ALI_ONS / script), json.dumps(options)],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        cwd=ALI_ONS,
    )
    if done.returncode != 0:
        raise SystemExit(f"{script} failed: {done.stderr[-2000:]}")
    last: list[dict[str, object]] = [
        json.loads(line) for line in done.stdout.splitlines() if line.startswith('{"done"')
    ]
    return last[-1]


def ours_produce(nameserver: str, n: int) -> float:
    with Producer(nameserver) as producer:
        producer.send(Message(TOPIC, BODY, tags="T"))  # routes and connections made before timing
        started = time.perf_counter()
        for _ in range(n):
            producer.send(Message(TOPIC, BODY, tags="T"))
        return n / (time.perf_counter() - started)


def ours_batched(nameserver: str, n: int) -> float:
    with Producer(nameserver) as producer:
        batch = [Message(TOPIC + "-batched", BODY, tags="T") for _ in range(1000)]
        producer.send_batch(batch)
        started = time.perf_counter()
        for _ in range(max(1, n // 1000)):
            producer.send_batch(batch)
        return max(1, n // 1000) * 1000 / (time.perf_counter() - started)


def ours_consume(nameserver: str, topic: str, expected: int) -> float:
    consumer = Consumer(nameserver)
    try:
        queues = len(consumer.queues(topic))
        started = time.perf_counter()
        got = 0
        for queue_id in range(queues):
            offset = 0
            while True:
                result = consumer.pull(topic, queue_id, offset, 32)
                if not result.messages:
                    break
                got += len(result.messages)
                offset = result.next_offset
        elapsed = time.perf_counter() - started
        assert got == expected, (got, expected)
        return got / elapsed
    finally:
        consumer.close()


def main() -> None:
    compiled.require_fresh()  # the checkout's build, as the source is now
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=20_000)
    n = parser.parse_args().messages
    install_ali_ons()
    with LocalCluster(brokers=1, processes=True, broker_config={"auto_create_topic_enable": False}) as cluster:
        with Admin(cluster.nameserver) as admin:
            for topic in (TOPIC, TOPIC + "-node", TOPIC + "-batched"):
                admin.create_topic(topic, queues=4)
        ns = cluster.nameserver
        print(f"rocketspark broker, one process; {n:,} messages of {len(BODY)} B, one client each\n")
        sent = node(
            "produce.js",
            {"nameSrv": ns, "topic": TOPIC + "-node", "count": n, "tags": ["T"], "bytes": len(BODY), "quiet": True},
        )
        node_rate = n / (float(str(sent["ms"])) / 1000)
        our_rate = ours_produce(ns, n)
        batched = ours_batched(ns, n)
        print("produce, one message per send, waiting for each answer")
        print(f"  ali-ons (4.x, node)        {node_rate:>12,.0f} msg/s")
        print(f"  rocketspark Producer.send  {our_rate:>12,.0f} msg/s   ali-ons / ours = {node_rate / our_rate:.2f}")
        print(f"  (Producer.send_batch, 1,000 per send: {batched:,.0f} msg/s)\n")
        got = node(
            "consume.js",
            {"nameSrv": ns, "topic": TOPIC + "-node", "group": "bench-g", "until": n, "quiet": True, "seconds": 600},
        )
        node_consume = int(str(got["done"])) / (max(1.0, float(str(got["ms"]))) / 1000)
        our_consume = ours_consume(ns, TOPIC + "-node", n)
        print("consume everything from the first offset (pulls of 32)")
        print(f"  ali-ons push consumer      {node_consume:>12,.0f} msg/s   (its handler's first to last message)")
        ratio = node_consume / our_consume
        print(f"  rocketspark Consumer.pull  {our_consume:>12,.0f} msg/s   ali-ons / ours = {ratio:.2f}")


if __name__ == "__main__":
    main()
