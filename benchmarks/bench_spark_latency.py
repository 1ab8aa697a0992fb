"""Spark streaming latency: how long after a send a micro-batch query has the message.

A producer sends one 100-byte message every ``--interval-ms`` (20 ms: 50 msg/s) to a topic of
``--queues`` queues; a streaming query over it with ``trigger(processingTime="0 seconds")``
hands each micro-batch to ``foreachBatch``, which collects the rows' ``bornTimestamp`` (set by
the producer, on the same machine) and notes the driver's clock. Prints p50, p99 and the
largest, for each ``latestOffsetCacheMs`` asked for (default: 100, the option's default, and 0).
The first ``--warmup-s`` seconds of the query (Python workers starting) are not counted.

This is the latency a user gets instead of Spark's Real-Time Mode, which a Python source cannot
use (docs/spark/streaming.md). Usage:
``python benchmarks/bench_spark_latency.py [--messages N] [--interval-ms N] [--cache-ms 100,0]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from rocketspark import Admin, LocalCluster, Message, Producer, compiled

BODY = b"x" * 100


def measure(spark: Any, nameserver: str, topic: str, cache_ms: int, args: argparse.Namespace) -> list[float]:
    """Send-to-driver latencies (ms) of ``args.messages`` messages through one query."""
    samples: list[float] = []
    counting = False

    def on_batch(batch: Any, _batch_id: int) -> None:
        rows = batch.selectExpr("unix_millis(bornTimestamp) AS born").collect()
        now = time.time() * 1000
        if counting:
            samples.extend(now - r.born for r in rows)

    query = (
        spark.readStream.format("rocketmq")
        .option("nameserver", nameserver)
        .option("topic", topic)
        .option("latestOffsetCacheMs", str(cache_ms))
        .load()
        .writeStream.foreachBatch(on_batch)
        .trigger(processingTime="0 seconds")
        .option("checkpointLocation", tempfile.mkdtemp(prefix="bench-latency-cp-"))
        .start()
    )
    try:
        with Producer(nameserver) as producer:
            deadline = time.monotonic() + args.warmup_s
            while time.monotonic() < deadline:  # the workers start on these
                producer.send(Message(topic, BODY))
                time.sleep(args.interval_ms / 1000)
            time.sleep(2)
            counting = True
            for i in range(args.messages):
                producer.send(Message(topic, BODY, queue_id=i % args.queues))
                time.sleep(args.interval_ms / 1000)
        time.sleep(3)  # the last micro-batches
    finally:
        query.stop()
    return samples


def main() -> None:
    compiled.require_fresh()  # the checkout's build, as the source is now
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=1500)
    parser.add_argument("--interval-ms", type=float, default=20)
    parser.add_argument("--queues", type=int, default=2)
    parser.add_argument("--warmup-s", type=float, default=15)
    parser.add_argument("--cache-ms", default="100,0", help="latestOffsetCacheMs values, a comma list")
    args = parser.parse_args()
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    print(f"\nsend to micro-batch latency: {args.messages} messages, one every {args.interval_ms:g} ms")
    with LocalCluster(brokers=1) as cluster:
        for cache_ms in (int(v) for v in args.cache_ms.split(",")):
            topic = f"latency-{cache_ms}"
            with Admin(cluster.nameserver) as admin:
                admin.create_topic(topic, args.queues)
            got = sorted(measure(spark, cluster.nameserver, topic, cache_ms, args))
            p99 = got[max(0, round(len(got) * 0.99) - 1)]
            print(
                f"  latestOffsetCacheMs={cache_ms:<4} p50 {statistics.median(got):6.0f} ms   p99 {p99:6.0f} ms   "
                f"max {got[-1]:6.0f} ms   ({len(got)} messages)"
            )
    spark.stop()


if __name__ == "__main__":
    main()
