"""The streaming table ``orders``: every message of the topic, once, as it arrives.

The table is a streaming table because its query is a streaming read; the pipeline keeps its
checkpoint under the spec's ``storage``, so a run picks up where the last one stopped.
"""

from pyspark import pipelines as dp
from pyspark.sql import DataFrame

spark = globals()["spark"]  # set by spark-pipelines before this file runs


@dp.table(comment="Every message of the RocketMQ topic, once")
def orders() -> DataFrame:
    return (
        spark.readStream.format("rocketmq")
        .option("nameserver", spark.conf.get("spark.rocketmq.nameserver"))
        .option("topic", spark.conf.get("spark.rocketmq.topic"))
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("queueId", "queueOffset", "tag", "CAST(body AS STRING) AS body", "storeTimestamp")
    )
