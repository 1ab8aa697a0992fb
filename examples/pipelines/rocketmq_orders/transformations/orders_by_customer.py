"""The materialized view ``orders_by_customer``: orders and their total per customer, recomputed
from the ``orders`` table on every run (the bodies are JSON: ``{"customer": "c-7", "amount": 12.5}``)."""

from pyspark import pipelines as dp
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

spark = globals()["spark"]  # set by spark-pipelines before this file runs


@dp.materialized_view(comment="Orders and their total per customer")
def orders_by_customer() -> DataFrame:
    return (
        spark.read.table("orders")
        .selectExpr(
            "get_json_object(body, '$.customer') AS customer",
            "CAST(get_json_object(body, '$.amount') AS DOUBLE) AS amount",
        )
        .groupBy("customer")
        .agg(F.count("*").alias("orders"), F.sum("amount").alias("total"))
    )
