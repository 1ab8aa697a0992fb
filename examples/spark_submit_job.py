"""A batch-and-stream job shipped with spark-submit, as a user would run it::

    PYSPARK_PYTHON=$(which python) spark-submit --master 'local[2]' examples/spark_submit_job.py \\
        --nameserver 127.0.0.1:9876 --topic orders --output /tmp/orders-parquet \\
        --checkpoint /tmp/orders-cp

It copies everything new in the topic to parquet (``Trigger.AvailableNow``: run it from cron
or a scheduler; each run continues where the last one stopped, exactly once), then prints a
summary read back with a batch query. ``format("rocketmq")`` is found with no register call:
pip-installing rocketspark into the interpreter Spark's workers run is all it takes.
"""

from __future__ import annotations

import argparse

from pyspark.sql import SparkSession
from pyspark.sql import functions as F


def main() -> None:
    parser = argparse.ArgumentParser(description="Copy a rocketspark topic to parquet, incrementally.")
    parser.add_argument("--nameserver", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--max-offsets-per-trigger", type=int, default=50_000)
    args = parser.parse_args()

    spark = SparkSession.builder.appName(f"copy-{args.topic}").getOrCreate()
    events = (
        spark.readStream.format("rocketmq")
        .option("nameserver", args.nameserver)
        .option("topic", args.topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(args.max_offsets_per_trigger))
        .load()
    )
    query = (
        events.select(
            "queueId", "queueOffset", "msgId", "tag", F.col("body").cast("string").alias("body"), "storeTimestamp"
        )
        .writeStream.format("parquet")
        .option("checkpointLocation", args.checkpoint)
        .trigger(availableNow=True)
        .start(args.output)
    )
    query.awaitTermination()
    rows = sum(p["numInputRows"] for p in query.recentProgress)
    stored = spark.read.parquet(args.output)
    print(f"copied {rows} new messages; {stored.count()} in {args.output}")
    stored.groupBy("queueId").agg(F.count("*").alias("messages"), F.max("queueOffset").alias("last_offset")).orderBy(
        "queueId"
    ).show()
    spark.stop()


if __name__ == "__main__":
    main()
