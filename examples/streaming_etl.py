"""Streaming ETL: order events from a static topic, running totals per customer to another topic.

The job reads JSON order events (``{"order": 1, "customer": "c7", "amount": 12.5}``) from
the topic ``orders``, keeps a running total and count per customer, and after every
micro-batch writes the current totals as JSON to the topic ``customer-totals`` keyed by
customer (``shardingKey``, so one customer's totals stay in order on one queue; the newest
message per customer is its current total). Spark's Python sinks take append and complete
output modes; an aggregation without a watermark needs complete. The read is exactly once across restarts and
broker remaps; the write is idempotent per micro-batch (see docs/spark/options.md, the `idempotent` sink option).

Run it against a running cluster::

    python examples/streaming_etl.py --nameserver 127.0.0.1:9876 --checkpoint /tmp/etl-cp

``make run`` runs it on an embedded cluster (``examples/main_job.py``).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

SOURCE = "orders"
TARGET = "customer-totals"


def build_query(
    spark: Any,
    nameserver: str,
    checkpoint: str,
    *,
    source: str = SOURCE,
    target: str = TARGET,
    trigger_seconds: float = 1.0,
    max_offsets_per_trigger: int = 20_000,
) -> Any:
    """Start the ETL query and return it."""
    from pyspark.sql import functions as F

    events = (
        spark.readStream.format("rocketmq")
        .option("nameserver", nameserver)
        .option("topic", source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
        .load()
    )
    orders = events.select(
        F.from_json(F.col("body").cast("string"), "order long, customer string, amount double").alias("o")
    ).select("o.*")
    totals = orders.groupBy("customer").agg(F.count("*").alias("orders"), F.round(F.sum("amount"), 2).alias("total"))
    return (
        totals.select(
            F.col("customer").alias("shardingKey"),
            F.to_json(F.struct("customer", "orders", "total")).alias("body"),
            F.lit("total").alias("tag"),
        )
        .writeStream.format("rocketmq")
        .option("nameserver", nameserver)
        .option("topic", target)
        .option("checkpointLocation", checkpoint)
        .outputMode("complete")
        .trigger(processingTime=f"{trigger_seconds} seconds")
        .start()
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nameserver", default=os.environ.get("ROCKETSPARK_NAMESRV", "127.0.0.1:9876"))
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--seconds", type=float, default=0, help="stop after this long (0: run until Ctrl-C)")
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.appName("rocketspark-etl").config("spark.sql.shuffle.partitions", "4").getOrCreate()
    query = build_query(spark, args.nameserver, args.checkpoint)
    query.awaitTermination(args.seconds or None)
    query.stop()
    spark.stop()


if __name__ == "__main__":
    main()
