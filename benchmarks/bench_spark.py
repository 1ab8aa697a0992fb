"""Spark connector benchmark: read and write rates against their ceilings, in one session.

Prints, for 100-byte messages:

- read: ``readStream`` of a 2M-message backlog (a static topic, 8 logical queues, stored in
  1,000-message batches) into the noop sink, 500,000-row micro-batches; the same session
  reading the same number of rows from a Python data source that yields prebuilt Arrow
  batches of the connector's schema from memory, twice: with the Arrow batch size the
  connector yields (``MIN_ARROW_ROWS``) and with 50,000-row batches (the API's best case);
  and Spark's own ``rate-micro-batch`` source into the same sink;
- write: ``writeStream`` of 2M rows into a topic, against the broker's own batched ingest
  from the client (1,000-message batches, 4 threads). ``--sink-columns`` picks the columns
  written: ``body`` (default), ``sharded`` (``body``, ``shardingKey`` and ``tag``, the shape of
  examples/streaming_etl.py) or ``keyed`` (``sharded`` plus a ``keys`` array).

- filtered batch reads: ``spark.read`` of a ``--filtered-rows`` topic (8 queues, 1,000-message
  batches of one tag each, tags A and B taking turns) with no filter and with
  ``queueId = 1``, ``queueOffset >= `` (the last fifth of each queue) and ``tag = 'A'``, with
  ``spark.sql.python.filterPushdown.enabled`` off (Spark filters) and on (the filters cut the
  read plan): the messages and bytes the brokers serve (their per-topic ``messagesOut`` and
  ``rocketmq_throughput_out``) and the time into the noop sink, best of two.
  ``--filtered-only`` runs just this part.

Rates are rows per second of micro-batch processing (``triggerExecution``), the median over
batches after the first (which pays for starting Python workers); each read rate is the best
of two runs. Usage:
``python benchmarks/bench_spark.py [--rows N] [--per-batch N] [--sink-columns body|sharded|keyed]
[--filtered-rows N] [--filtered-only]``.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from rocketspark import Admin, LocalCluster, Message, Producer, compiled
from rocketspark.spark.reading import MIN_ARROW_ROWS

BEST_ARROW_ROWS = 50_000  # the Data Source API's best case, measured (research/datasource-api)
ROUNDS = 2

QUEUES = 8
BODY = 100
BODY_SQL = f"repeat('x', {BODY - 8}) || lpad(CAST(value AS STRING), 8, '0') AS body"
SINK_COLUMNS = {  # the columns the write benchmark gives the sink
    "body": [BODY_SQL],
    "sharded": [BODY_SQL, "CAST(value % 1000 AS STRING) AS shardingKey", "'t' AS tag"],
    "keyed": [
        BODY_SQL,
        "CAST(value % 1000 AS STRING) AS shardingKey",
        "'t' AS tag",
        "array(CAST(value AS STRING)) AS keys",
    ],
}


def batch_rate(query: Any) -> float:
    """Median rows/s of the query's micro-batches after the first."""
    batches = [p for p in query.recentProgress if p["numInputRows"]]
    rates = [p["numInputRows"] / (p["durationMs"]["triggerExecution"] / 1000) for p in batches[1:]] or [
        p["numInputRows"] / (p["durationMs"]["triggerExecution"] / 1000) for p in batches
    ]
    return float(statistics.median(rates))


def run(stream: Any, checkpoint: str, *, fmt: str = "noop", batches: int | None = None, **options: str) -> Any:
    writer = stream.writeStream.format(fmt).option("checkpointLocation", checkpoint)
    for key, value in options.items():
        writer = writer.option(key, value)
    if batches is None:
        query = writer.trigger(availableNow=True).start()
        query.awaitTermination()
        return query
    query = writer.trigger(processingTime="0 seconds").start()
    while len([p for p in query.recentProgress if p["numInputRows"]]) < batches:
        if query.exception():
            raise query.exception()
        time.sleep(0.2)
    query.stop()
    return query


def ceiling_source(rows: int, per_batch: int, arrow_rows: int) -> Any:
    """A Python source that yields prebuilt Arrow batches of ``arrow_rows`` rows with the
    connector's schema (the last one of a partition smaller, so every row is read)."""
    from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
    from pyspark.sql.streaming.datasource import ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow

    from rocketspark.spark.arrow import arrow_schema
    from rocketspark.spark.schema import source_schema

    class Part(InputPartition):
        def __init__(self, rows: int) -> None:
            self.rows = rows

    class Reader(DataSourceStreamReader, SupportsTriggerAvailableNow):
        def initialOffset(self) -> dict[str, int]:
            return {"offset": 0}

        def getDefaultReadLimit(self) -> ReadLimit:
            return ReadMaxRows(per_batch)

        def prepareForTriggerAvailableNow(self) -> None:
            """As the connector does: availableNow then still honours the read limit, so the
            micro-batches are the same size as the connector's (without it, Spark reads
            everything in one)."""

        def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
            cap = limit.max_rows if isinstance(limit, ReadMaxRows) else rows
            return {"offset": min(rows, start["offset"] + cap)}

        def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[Part]:
            n = end["offset"] - start["offset"]
            return [Part(n // QUEUES) for _ in range(QUEUES)] if n else []

        def read(self, partition: Any) -> Any:
            import pyarrow as pa

            n = arrow_rows
            values = {
                "topic": ["t"] * n,
                "queueId": [0] * n,
                "queueOffset": list(range(n)),
                "msgId": ["0" * 32] * n,
                "body": [b"x" * BODY] * n,
                "bornTimestamp": [0] * n,
                "storeTimestamp": [0] * n,
                "brokerName": ["b"] * n,
            }  # tag and keys stay null; the types are the connector's own
            schema = arrow_schema(False)
            batch = pa.RecordBatch.from_pydict({f.name: values.get(f.name, [None] * n) for f in schema}, schema=schema)
            for _ in range(partition.rows // n):
                yield batch
            if partition.rows % n:
                yield batch.slice(0, partition.rows % n)

    class Ceiling(DataSource):
        @classmethod
        def name(cls) -> str:
            return f"arrow_ceiling_{arrow_rows}"

        def schema(self) -> Any:
            return source_schema(False)

        def streamReader(self, schema: Any) -> Reader:
            return Reader()

    return Ceiling


def fill(nameserver: str, topic: str, rows: int) -> float:
    """Produce the backlog with the client; return its batched ingest rate."""
    body = os.urandom(BODY)
    batches = [[Message(topic, body, queue_id=q) for _ in range(1000)] for q in range(QUEUES)]
    per_thread = rows // 1000 // 4

    def work(k: int) -> None:
        with Producer(nameserver) as producer:
            for i in range(per_thread):
                producer.send_batch(batches[(i * 4 + k) % QUEUES])

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return per_thread * 4 * 1000 / (time.perf_counter() - start)


PUSHDOWN = "spark.sql.python.filterPushdown.enabled"
FILTERS = ("true", "queueId = 1", "queueOffset >= {tail}", "tag = 'A'")


def fill_tagged(nameserver: str, topic: str, rows: int) -> None:
    """``rows`` messages over the queues in 1,000-message batches of one tag, A and B by turns."""
    with Producer(nameserver) as producer:
        for k in range(rows // 1000 // QUEUES):
            for q in range(QUEUES):
                body = os.urandom(BODY)
                producer.send_batch([Message(topic, body, queue_id=q, tags="AB"[k % 2]) for _ in range(1000)])


def served(cluster: LocalCluster, admin: Admin, topic: str) -> tuple[int, int]:
    """Messages (the brokers' counters) and bytes (their ``/metrics``) of ``topic`` served so far."""
    messages, size = 0, 0.0
    line = re.compile(
        r'^rocketmq_throughput_out(?:_total)?\{[^}]*topic="' + re.escape(topic) + r'"[^}]*\} (\S+)$', re.M
    )
    for name, url in cluster.metrics_urls.items():
        if name == "nameserver":
            continue
        messages += admin.broker_counters(name)["topics"].get(topic, {}).get("messagesOut", 0)
        with urllib.request.urlopen(urllib.request.Request(url, headers=cluster.metrics_headers), timeout=10) as r:
            size += sum(float(v) for v in line.findall(r.read().decode()))
    return messages, int(size)


def filtered_reads(spark: Any, cluster: LocalCluster, topic: str, rows: int) -> list[tuple[str, bool, int, int, float]]:
    """(filter, pushdown on, messages served, bytes served, seconds) of each filtered batch read."""
    out = []
    with Admin(cluster.nameserver) as admin:
        for where in FILTERS:
            where = where.format(tail=rows // QUEUES * 4 // 5)
            for on in (False, True):
                spark.conf.set(PUSHDOWN, str(on).lower())
                best = float("inf")
                for _ in range(ROUNDS):
                    before = served(cluster, admin, topic)
                    start = time.perf_counter()
                    # loaded afresh: Spark 4.3 reuses a loaded DataFrame's pushed plan (docs/spark/pushdown.md)
                    df = spark.read.format("rocketmq").option("nameserver", cluster.nameserver).option("topic", topic)
                    df.load().where(where).write.format("noop").mode("overwrite").save()
                    best = min(best, time.perf_counter() - start)
                    after = served(cluster, admin, topic)
                out.append((where, on, after[0] - before[0], after[1] - before[1], best))
    spark.conf.unset(PUSHDOWN)
    return out


def print_filtered(figures: list[tuple[str, bool, int, int, float]], rows: int) -> None:
    print(f"\nfiltered batch reads: {rows:,} messages of {BODY} B, {QUEUES} queues, 1,000-message batches, 1 broker")
    print(f"  {'filter':<24} {'pushdown':<9} {'messages served':>16} {'bytes served':>14} {'seconds':>8}")
    for where, on, messages, size, seconds in figures:
        print(f"  {where:<24} {'on' if on else 'off':<9} {messages:>16,} {size:>14,} {seconds:>8.2f}")


def main() -> None:
    compiled.require_fresh()  # the checkout's build, as the source is now
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--per-batch", type=int, default=500_000)
    parser.add_argument("--sink-columns", choices=sorted(SINK_COLUMNS), default="body")
    parser.add_argument("--filtered-rows", type=int, default=400_000)
    parser.add_argument("--filtered-only", action="store_true", help="only the filtered batch reads")
    args = parser.parse_args()
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("rocketspark-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("OFF")  # stopping a query mid-batch logs harmless aborts
    work = tempfile.mkdtemp(prefix="rocketspark-bench-")
    with LocalCluster(brokers=1, processes=True) as cluster:
        ns = cluster.nameserver
        with Admin(ns) as admin:
            admin.create_static_topic("filtered", QUEUES)
        fill_tagged(ns, "filtered", args.filtered_rows)
        filtered = filtered_reads(spark, cluster, "filtered", args.filtered_rows)
        if args.filtered_only:
            spark.stop()
            print_filtered(filtered, args.filtered_rows)
            return
        with Admin(ns) as admin:
            admin.create_static_topic("backlog", QUEUES)
            admin.create_static_topic("sunk", QUEUES)
        ingest = fill(ns, "backlog", args.rows)
        per_batch = str(args.per_batch)
        warm = (
            spark.readStream.format("rocketmq")
            .option("nameserver", ns)
            .option("topic", "backlog")
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "20000")
            .load()
        )
        run(warm, f"{work}/warm", batches=2)  # start Python workers before measuring anything

        source = (
            spark.readStream.format("rocketmq")
            .option("nameserver", ns)
            .option("topic", "backlog")
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", per_batch)
            .load()
        )
        # Each read is the best of ROUNDS runs: the first run of a new Python source in a session
        # is up to 3x slower than the next, whatever its batch size (measured), which would
        # otherwise decide which ceiling looks best.
        read = max(batch_rate(run(source, f"{work}/read-{i}")) for i in range(ROUNDS))
        ceilings = {}
        for arrow_rows in (MIN_ARROW_ROWS, BEST_ARROW_ROWS):
            spark.dataSource.register(ceiling_source(args.rows, args.per_batch, arrow_rows))
            stream = spark.readStream.format(f"arrow_ceiling_{arrow_rows}").load()
            ceilings[arrow_rows] = max(
                batch_rate(run(stream, f"{work}/ceiling-{arrow_rows}-{i}")) for i in range(ROUNDS)
            )

        rate_source = (
            spark.readStream.format("rate-micro-batch")
            .option("rowsPerBatch", per_batch)
            .option("numPartitions", str(QUEUES))
            .load()
        )
        rate = batch_rate(run(rate_source, f"{work}/rate", batches=args.rows // args.per_batch))

        payload = (
            spark.readStream.format("rate-micro-batch")
            .option("rowsPerBatch", per_batch)
            .option("numPartitions", str(QUEUES))
            .load()
            .selectExpr(*SINK_COLUMNS[args.sink_columns])
        )
        write = batch_rate(
            run(
                payload,
                f"{work}/write",
                fmt="rocketmq",
                batches=args.rows // args.per_batch,
                nameserver=ns,
                topic="sunk",
            )
        )
    spark.stop()

    print(
        f"\nrocketspark Spark connector benchmark: {args.rows:,} rows of {BODY} B, {args.per_batch:,} per micro-batch, "
        f"local[2], {QUEUES} logical queues, 1 broker\n"
    )
    same, best = ceilings[MIN_ARROW_ROWS], ceilings[BEST_ARROW_ROWS]
    print(f"read  rocketmq -> noop           {read:>12,.0f} rows/s")
    print(
        f"      prebuilt Arrow, {MIN_ARROW_ROWS:,}-row batches (what the connector yields) {same:>10,.0f} rows/s   "
        f"ratio {read / same:.2f}"
    )
    print(
        f"      prebuilt Arrow, {BEST_ARROW_ROWS:,}-row batches (the API's best case)      {best:>10,.0f} rows/s   "
        f"ratio {read / best:.2f} (target >= 0.9)"
    )
    print(f"      Spark rate source -> noop  {rate:>12,.0f} rows/s")
    print(f"write rate -> rocketmq           {write:>12,.0f} rows/s   columns: {args.sink_columns} (target >= 500,000)")
    print(f"      client batched ingest      {ingest:>12,.0f} msg/s    ratio {write / ingest:.2f}")
    print_filtered(filtered, args.filtered_rows)


if __name__ == "__main__":
    main()
