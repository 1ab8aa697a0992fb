"""A packaged job's checks: the driver's check of spark-submit's settings, and what an
executor without rocketspark is told."""

from __future__ import annotations

import pickle
import sys
import types

import pytest

from rocketspark.errors import ConfigError
from rocketspark.spark.datasource import check_packaged
from rocketspark.spark.guard import Guarded, MissingOnExecutor


def test_a_shipped_interpreter_needs_an_archive_unpacked_under_its_directory() -> None:
    check_packaged({})  # the workers' own Python
    check_packaged({"spark.pyspark.python": "/opt/python/bin/python3"})
    check_packaged(
        {"spark.pyspark.python": "./environment/bin/python", "spark.archives": "/jobs/env.tar.gz#environment"}
    )
    check_packaged({"spark.pyspark.python": "./env/bin/python", "spark.yarn.dist.archives": "hdfs:///e.tgz#env"})
    with pytest.raises(ConfigError, match=r"no archive is unpacked as 'environment' \(spark.archives: none\)"):
        check_packaged({"spark.pyspark.python": "./environment/bin/python"})
    with pytest.raises(ConfigError, match=r"--archives job-env\.tar\.gz#environment"):
        check_packaged({"spark.pyspark.python": "./environment/bin/python", "spark.archives": "/jobs/env.tar.gz#other"})


class Shipped(Guarded):
    def __init__(self, value: int) -> None:
        self.value = value


def test_guarded_objects_travel_and_come_back() -> None:
    back = pickle.loads(pickle.dumps(Shipped(7)))
    assert isinstance(back, Shipped) and back.value == 7


def test_an_executor_without_the_classes_gets_told_how_to_ship_them() -> None:
    ghost = types.ModuleType("ghost_connector")
    exec("from rocketspark.spark.guard import Guarded\nclass Reader(Guarded):\n    pass\n", ghost.__dict__)
    ghost.Reader.__module__ = "ghost_connector"
    sys.modules["ghost_connector"] = ghost
    try:
        payload = pickle.dumps(ghost.Reader())
    finally:
        del sys.modules["ghost_connector"]  # the executor's Python has no such module
    with pytest.raises(MissingOnExecutor, match="rocketspark is not installed in the Python this Spark executor") as e:
        pickle.loads(payload)
    assert "--archives job-env.tar.gz#environment --conf spark.pyspark.python=./environment/bin/python" in str(e.value)
    assert e.value.__cause__ is None and e.value.__suppress_context__
