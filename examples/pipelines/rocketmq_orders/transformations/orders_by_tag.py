"""The materialized view ``orders_by_tag``: how many orders each tag has, recomputed each run."""

from pyspark import pipelines as dp
from pyspark.sql import DataFrame, functions as F

spark = globals()["spark"]  # set by spark-pipelines before this file runs


@dp.materialized_view(comment="Orders per tag")
def orders_by_tag() -> DataFrame:
    return spark.read.table("orders").groupBy("tag").agg(F.count("*").alias("orders"))
