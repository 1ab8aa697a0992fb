"""Discovery shim: pyspark imports top-level ``pyspark_*`` modules and registers their
``DefaultSource`` under its ``name()``, so ``format("rocketmq")`` works with no register call.

Kept light: it is imported by every Spark Python worker that looks up a data source.
"""

from rocketspark.spark.datasource import RocketMQDataSource as DefaultSource

__all__ = ["DefaultSource"]
