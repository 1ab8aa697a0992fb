"""Stateful processing per message group: a running total and activity sessions per customer.

Payments arrive as FIFO messages on the topic ``payments``: the message group (RocketMQ's
``__SHARDINGKEY`` property: a v2 client's ``message_group``, the sink's ``shardingKey``) is the
customer, the body is JSON with the amount in cents (``{"amount": 1250}``). One group's messages
are in one queue, in the order they were sent. The query groups by message group and runs
:class:`CustomerActivity` with ``transformWithState`` (Spark 4.1+), which keeps per customer:

- a running total (``ValueState`` with a TTL: a customer silent for ``total_ttl_ms`` is forgotten,
  so state does not grow with every customer ever seen);
- the open session (``ValueState``): the payments since the customer became active, closed by a
  processing-time timer after ``session_timeout_ms`` without a payment.

It writes one ``payment`` row per message (with the total after it) and one ``session`` row per
closed session to the topic ``customer-activity``, keyed by customer (``shardingKey``), through
the exactly-once sink: a restarted query re-runs its last micro-batch with the same batch time,
so it writes the same rows, and the sink stores each once.

Run it against a running cluster::

    python examples/customer_sessions.py --nameserver 127.0.0.1:9876 --checkpoint /tmp/sessions-cp
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from typing import Any

from pyspark.sql import Row
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.streaming.stateful_processor import ExpiredTimerInfo, TimerValues

from rocketspark.protocol.properties import SHARDING_KEY  # where RocketMQ keeps a message's group

SOURCE = "payments"
TARGET = "customer-activity"
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
OUTPUT = "customer string, kind string, firstOffset long, lastOffset long, payments long, amount long, total long"
SESSION = "firstOffset long, lastOffset long, payments long, amount long, lastPaymentMs long"
DAY_MS = 24 * 3600 * 1000


class CustomerActivity(StatefulProcessor):
    """Per customer (message group): a running total and the open session.

    Spark hands a group's rows of one micro-batch as an iterator in no set order, so they are
    sorted by ``queueOffset`` (one group is one queue, so that is the order they were sent in);
    batches run one after another, so a later batch only holds later messages of the group.
    """

    def __init__(self, session_timeout_ms: int, total_ttl_ms: int) -> None:
        self.session_timeout_ms = session_timeout_ms
        self.total_ttl_ms = total_ttl_ms

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.total = handle.getValueState("total", "cents long", ttlDurationMs=self.total_ttl_ms)
        self.session = handle.getValueState("session", SESSION)

    def handleInputRows(self, key: Any, rows: Iterator[Row], timerValues: TimerValues) -> Iterator[Row]:
        customer, now = key[0], timerValues.getCurrentProcessingTimeInMs()
        total = self.total.get()[0] if self.total.exists() else 0
        session = self.session.get() if self.session.exists() else None
        if session is not None and session[4] + self.session_timeout_ms <= now:
            # Its timer is due but fires after the input of this batch: close it here first.
            yield closed(customer, session, total)
            session = None
        for row in sorted(rows, key=lambda r: r.queueOffset):
            total += row.amount
            yield output(customer, "payment", (row.queueOffset, row.queueOffset, 1, row.amount), total)
            first, payments, amount = (session[0], session[2], session[3]) if session else (row.queueOffset, 0, 0)
            session = (first, row.queueOffset, payments + 1, amount + row.amount, now)
        self.total.update((total,))
        self.session.update(session)
        for timer in list(self.handle.listTimers()):
            self.handle.deleteTimer(timer)
        self.handle.registerTimer(now + self.session_timeout_ms)

    def handleExpiredTimer(
        self, key: Any, timerValues: TimerValues, expiredTimerInfo: ExpiredTimerInfo
    ) -> Iterator[Row]:
        if self.session.exists():
            yield closed(key[0], self.session.get(), self.total.get()[0] if self.total.exists() else 0)
            self.session.clear()

    def close(self) -> None:
        pass


def closed(customer: str, session: Any, total: int) -> Row:
    """The output row of a closed session (``session`` as stored: see ``SESSION``)."""
    return output(customer, "session", tuple(session[:4]), total)


def output(customer: str, kind: str, span: tuple[int, ...], total: int) -> Row:
    """A row of ``OUTPUT`` (Spark matches them by name); ``span`` is first and last offset,
    payments and amount."""
    first, last, payments, amount = span
    return Row(
        customer=customer, kind=kind, firstOffset=first, lastOffset=last, payments=payments, amount=amount, total=total
    )


def build_query(
    spark: Any,
    nameserver: str,
    checkpoint: str,
    *,
    source: str = SOURCE,
    target: str = TARGET,
    session_timeout_ms: int = 30 * 60 * 1000,
    total_ttl_ms: int = 30 * DAY_MS,
    trigger_seconds: float = 1.0,
    max_offsets_per_trigger: int = 20_000,
) -> Any:
    """Start the query and return it. transformWithState needs the RocksDB state store."""
    from pyspark.sql import functions as F

    if __name__ != "__main__":  # imported: ship the processor's code with the query
        from pyspark import cloudpickle

        cloudpickle.register_pickle_by_value(sys.modules[__name__])
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", ROCKSDB)
    payments = (
        spark.readStream.format("rocketmq")
        .option("nameserver", nameserver)
        .option("topic", source)
        .option("startingOffsets", "earliest")
        .option("includeProperties", "true")
        .option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
        .load()
        .select(
            F.col("properties")[SHARDING_KEY].alias("shardingKey"),
            "queueOffset",
            F.get_json_object(F.col("body").cast("string"), "$.amount").cast("long").alias("amount"),
        )
        .where("shardingKey IS NOT NULL")
    )
    activity = payments.groupBy("shardingKey").transformWithState(
        statefulProcessor=CustomerActivity(session_timeout_ms, total_ttl_ms),
        outputStructType=OUTPUT,
        outputMode="Append",
        timeMode="ProcessingTime",
    )
    return (
        activity.select(
            F.col("customer").alias("shardingKey"), F.to_json(F.struct("*")).alias("body"), F.col("kind").alias("tag")
        )
        .writeStream.format("rocketmq")
        .option("nameserver", nameserver)
        .option("topic", target)
        .option("checkpointLocation", checkpoint)
        .outputMode("append")
        .trigger(processingTime=f"{trigger_seconds} seconds")
        .start()
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nameserver", default=os.environ.get("ROCKETSPARK_NAMESRV", "127.0.0.1:9876"))
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--session-timeout-seconds", type=float, default=1800)
    parser.add_argument("--seconds", type=float, default=0, help="stop after this long (0: run until Ctrl-C)")
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.appName("rocketspark-sessions").config("spark.sql.shuffle.partitions", "4").getOrCreate()
    )
    query = build_query(
        spark, args.nameserver, args.checkpoint, session_timeout_ms=int(args.session_timeout_seconds * 1000)
    )
    query.awaitTermination(args.seconds or None)
    query.stop()
    spark.stop()


if __name__ == "__main__":
    main()
