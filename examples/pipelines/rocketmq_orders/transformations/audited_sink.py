"""The sink ``audited``: every row of the ``orders`` table, written once to another topic.

A sink is written by append flows only (Spark's rule). This flow is a streaming read of the
table, so each row reaches the topic once per run, and a micro-batch Spark runs again is stored
once (the rocketmq sink is idempotent per micro-batch). Each message's key says where it came
from: ``<queueId>:<queueOffset>`` of the topic the ``orders`` table reads.
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
    return spark.readStream.table("orders").selectExpr("body", "concat_ws(':', queueId, queueOffset) AS keys")
