"""The sink ``audited``: every order of the ``orders`` table, written once to another topic.

A sink is written by append flows only (Spark's rule); the flow is a streaming read of the
table, so each row reaches the topic once, and a re-run micro-batch is deduplicated by the
brokers (the rocketmq sink is idempotent per micro-batch).
"""

from pyspark import pipelines as dp
from pyspark.sql import DataFrame

spark = globals()["spark"]  # set by spark-pipelines before this file runs

dp.create_sink(
    "audited",
    format="rocketmq",
    options={
        "nameserver": spark.conf.get("spark.rocketmq.nameserver"),
        "topic": spark.conf.get("spark.rocketmq.outTopic"),
    },
)


@dp.append_flow(target="audited")
def audit_orders() -> DataFrame:
    return spark.readStream.table("orders").selectExpr("body", "tag", "CAST(queueOffset AS STRING) AS keys")
