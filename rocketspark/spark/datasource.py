"""``format("rocketmq")``: the Spark data source of rocketspark.

After ``pip install rocketspark`` the short name works in any new SparkSession, with no
register call: pyspark discovers the top-level module ``pyspark_rocketmq``, which exposes
this class as ``DefaultSource``. That discovery needs Spark's Python workers to run the
interpreter rocketspark is installed in (set ``PYSPARK_PYTHON`` to it); where discovery is
off, call :func:`register`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from rocketspark.spark.options import parse_reader, parse_writer
from rocketspark.spark.schema import source_schema

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class RocketMQDataSource(DataSource):
    """Read and write rocketspark topics from Spark, streaming or batch.

    Examples
    --------
    Stream a topic into parquet, exactly once across restarts and broker remaps:

    >>> events = (spark.readStream.format("rocketmq")
    ...     .option("nameserver", "127.0.0.1:9876")
    ...     .option("topic", "orders")
    ...     .option("startingOffsets", "earliest")
    ...     .option("maxOffsetsPerTrigger", 100000)
    ...     .load())
    >>> query = (events.selectExpr("queueId", "queueOffset", "CAST(body AS STRING) AS json")
    ...     .writeStream.format("parquet")
    ...     .option("checkpointLocation", "/tmp/cp")
    ...     .start("/tmp/out"))

    Write results to another topic (columns body/value, topic, tag, keys, properties,
    queueId, shardingKey):

    >>> (counts.selectExpr("CAST(customer AS STRING) AS shardingKey", "to_json(struct(*)) AS body")
    ...     .writeStream.format("rocketmq")
    ...     .option("nameserver", "127.0.0.1:9876").option("topic", "order-totals")
    ...     .option("checkpointLocation", "/tmp/cp2").outputMode("update").start())

    A bounded batch read:

    >>> spark.read.format("rocketmq").option("nameserver", "127.0.0.1:9876") \\
    ...     .option("topic", "orders").option("endingOffsets", '{"orders": {"0": 100}}').load()

    Source columns: topic, queueId (logical queue), queueOffset (logical offset), msgId, tag,
    keys, body, bornTimestamp, storeTimestamp, brokerName (the segment's broker) and, with
    ``includeProperties``, properties. One Spark partition per logical queue.
    """

    @classmethod
    def name(cls) -> str:
        return "rocketmq"

    def schema(self) -> StructType:
        # Options are checked here, at load(): a bad one fails before the query starts. Spark
        # has not said yet whether this is spark.read or readStream, so the checks that depend
        # on it wait for reader() / streamReader().
        return source_schema(parse_reader(self.options, streaming=None).include_properties)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from rocketspark.spark.source import RocketMQStreamReader

        return RocketMQStreamReader(parse_reader(self.options, streaming=True))

    def reader(self, schema: StructType) -> DataSourceReader:
        from rocketspark.spark.source import RocketMQBatchReader

        return RocketMQBatchReader(parse_reader(self.options, streaming=False))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from rocketspark.spark.sink import RocketMQStreamWriter

        return RocketMQStreamWriter(parse_writer(self.options), schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from rocketspark.spark.sink import RocketMQBatchWriter

        return RocketMQBatchWriter(parse_writer(self.options), schema)


def register(spark: SparkSession) -> None:
    """Register ``format("rocketmq")`` in a session where automatic discovery is off."""
    spark.dataSource.register(RocketMQDataSource)
