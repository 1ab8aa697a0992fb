"""The Spark connector: ``format("rocketmq")`` source and sink (needs pyspark >= 4.2)."""

from rocketspark.spark.datasource import RocketMQDataSource, register
from rocketspark.spark.metrics import offsets_behind_latest, total_lag

__all__ = ["RocketMQDataSource", "offsets_behind_latest", "register", "total_lag"]
