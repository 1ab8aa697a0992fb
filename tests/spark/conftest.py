"""One local SparkSession for the whole test run, and a cluster for the Spark tests.

Spark's Python workers must run this interpreter (it has rocketspark installed), so
PYSPARK_PYTHON is set before the JVM starts. The project is installed non-editable by
``make test``, which is what lets Spark discover ``format("rocketmq")`` with no register call.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest

from rocketspark import LocalCluster

pytestmark = pytest.mark.spark


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("rocketspark-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.streaming.stopTimeout", "60s")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    """Three brokers; tests put their topics on two and move queues to the third."""
    with LocalCluster(brokers=3, broker_config={"auto_create_topic_enable": False}) as c:
        yield c
