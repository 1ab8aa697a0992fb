"""The source schema, as Spark sees it (its Arrow twin is in :mod:`rocketspark.spark.arrow`).

``priority`` is a priority message's priority (RocketMQ 5.4, RIP-80: higher is served first to
pop consumers), null for any other message.
"""

from __future__ import annotations

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)


def source_schema(include_properties: bool) -> StructType:
    fields = [
        StructField("topic", StringType()),
        StructField("queueId", IntegerType()),
        StructField("queueOffset", LongType()),
        StructField("msgId", StringType()),
        StructField("tag", StringType()),
        StructField("keys", ArrayType(StringType())),
        StructField("body", BinaryType()),
        StructField("bornTimestamp", TimestampType()),
        StructField("storeTimestamp", TimestampType()),
        StructField("brokerName", StringType()),
        StructField("priority", IntegerType()),
    ]
    if include_properties:
        fields.append(StructField("properties", MapType(StringType(), StringType())))
    return StructType(fields)
