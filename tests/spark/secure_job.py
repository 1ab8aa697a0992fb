"""A spark-submit job against a cluster with users and TLS on (run by test_security.py).

It writes, reads and streams with credentials, prints EXPLAIN, then tries the same without
them. Logging is as talkative as it gets (Spark at INFO, rocketspark at DEBUG, an event log),
so that the test can search everything the job left behind for the secret.
"""

from __future__ import annotations

import argparse
import logging
import sys

from pyspark.sql import SparkSession


def first_line_with(text: str, marker: str) -> str:
    return next((line.strip() for line in text.splitlines() if marker in line), f"<no line with {marker!r}>")


def main() -> int:
    parser = argparse.ArgumentParser()
    for name in ("nameserver", "ca", "access-key", "secret-key", "checkpoint", "events"):
        parser.add_argument(f"--{name}", required=True)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    logging.getLogger("rocketspark").setLevel(logging.DEBUG)
    spark = (
        SparkSession.builder.appName("rocketspark-secure-job")
        .config("spark.eventLog.enabled", "true")
        .config("spark.eventLog.dir", args.events)
        .config("spark.eventLog.compress", "false")  # searchable as written
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("INFO")
    tls = {"nameserver": args.nameserver, "tls": "true", "tlsCaFile": args.ca}
    secure = tls | {"accessKey": args.access_key, "secretKey": args.secret_key}

    rows = spark.range(100).selectExpr("concat('m-', cast(id as string)) as body")
    rows.write.format("rocketmq").mode("append").options(**secure).option("topic", "orders").save()
    read = spark.read.format("rocketmq").options(**secure).option("topic", "orders").load()
    read.explain(True)
    print("READ", read.count(), flush=True)

    stream = spark.readStream.format("rocketmq").options(**secure).option("topic", "orders")
    query = (
        stream.option("startingOffsets", "earliest")
        .load()
        .selectExpr("body")
        .writeStream.format("rocketmq")
        .options(**secure)
        .option("topic", "copy")
        .option("checkpointLocation", args.checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    query.explain(True)
    print("STREAMED", sum(p["numInputRows"] for p in query.recentProgress), flush=True)

    marker = "refused this query"
    try:
        spark.read.format("rocketmq").options(**tls).option("topic", "orders").load().count()
        print("READ WITHOUT CREDENTIALS SUCCEEDED", flush=True)
    except Exception as exc:  # Spark wraps the Python error; its own sentence is in there
        print("REFUSED READ", first_line_with(str(exc), marker), flush=True)
    try:
        rows.write.format("rocketmq").mode("append").options(**tls).option("topic", "orders").save()
        print("WRITE WITHOUT CREDENTIALS SUCCEEDED", flush=True)
    except Exception as exc:
        print("REFUSED WRITE", first_line_with(str(exc), marker), flush=True)
    unsigned = spark.readStream.format("rocketmq").options(**tls).option("topic", "orders").load()
    try:
        unsigned.writeStream.format("console").start().awaitTermination(120)
        print("STREAM WITHOUT CREDENTIALS SUCCEEDED", flush=True)
    except Exception as exc:
        print("REFUSED STREAM", first_line_with(str(exc), marker), flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
