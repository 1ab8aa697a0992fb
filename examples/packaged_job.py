"""A job for a cluster whose nodes have never heard of rocketspark: it is shipped with
``rocketspark package-job`` (see the README, "Running on a cluster")::

    rocketspark package-job examples/packaged_job.py -o job-env.tar.gz
    spark-submit --master <master> --archives job-env.tar.gz#environment \\
        --conf spark.pyspark.python=./environment/bin/python \\
        examples/packaged_job.py --nameserver <host:port> --source orders --sink orders-enriched \\
        --checkpoint /shared/checkpoints/orders-enriched

It copies every message of a (static) topic to another topic, exactly once (a streaming query
with ``Trigger.AvailableNow`` and a checkpoint: run it again and it continues where it stopped,
sending nothing twice), each with the interpreter that processed it and where that interpreter
found rocketspark: the executors' Python and rocketspark are the archive's.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StringType

import rocketspark


def main() -> None:
    started = time.time()
    parser = argparse.ArgumentParser(description="Copy a topic to another, exactly once, on a cluster.")
    parser.add_argument("--nameserver", required=True)
    parser.add_argument("--source", required=True)
    parser.add_argument("--sink", required=True)
    parser.add_argument("--checkpoint", required=True)
    args = parser.parse_args()

    rocketspark.check_submit()  # a missing --archives is named before Spark starts a Python worker
    spark = SparkSession.builder.appName(f"packaged-{args.source}").getOrCreate()
    print(f"job started {time.time() - started:.1f} s after the script did", flush=True)
    rocketspark.register(spark)  # format("rocketmq") with no discovery needed

    @F.udf(returnType=StringType())
    def interpreter() -> str:
        return sys.executable  # the executor's Python: the archive's

    @F.udf(returnType=StringType())
    def connector() -> str:
        return str(importlib.util.find_spec("rocketspark").origin)  # where the executor found rocketspark

    source = (
        spark.readStream.format("rocketmq")
        .option("nameserver", args.nameserver)
        .option("topic", args.source)
        .option("startingOffsets", "earliest")
        .load()
    )
    query = (
        source.select(
            F.to_json(
                F.struct(
                    F.col("queueId"),
                    F.col("queueOffset"),
                    F.col("body").cast("string").alias("body"),
                    interpreter().alias("python"),
                    connector().alias("rocketspark"),
                )
            ).alias("body"),
            F.concat_ws("-", F.col("queueId"), F.col("queueOffset")).alias("keys"),
        )
        .writeStream.format("rocketmq")
        .option("nameserver", args.nameserver)
        .option("topic", args.sink)
        .option("checkpointLocation", args.checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    copied = sum(p["numInputRows"] for p in query.recentProgress)
    print(f"copied {copied} messages from {args.source} to {args.sink}", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
