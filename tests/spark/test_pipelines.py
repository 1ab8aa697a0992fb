"""The Spark Declarative Pipelines example runs as a user runs it: ``spark-pipelines run`` in its
directory, a real subprocess with its own Spark Connect server, against a real cluster.

The pipeline (examples/pipelines/rocketmq_orders) reads a topic into a streaming table,
aggregates the table in a materialized view and writes the table's rows to another topic through
a rocketmq sink. Its tables are read back here from their files (the pipeline's Hive catalog is
an embedded Derby that one process at a time may open).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from rocketspark import Admin, LocalCluster, Message, Producer

pytestmark = [pytest.mark.spark, pytest.mark.slow]
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "pipelines" / "rocketmq_orders"
# Spark's own defaults for a run, as the example's docs give them: a catalog that outlives
# the run, so that the second run finds the tables of the first.
RUN = ("run", "--conf", "spark.sql.catalogImplementation=hive", "--conf", "spark.ui.enabled=false")


def _project(tmp_path: Path, nameserver: str) -> Path:
    """The example copied to ``tmp_path``, pointed at this cluster and a storage of its own."""
    project = tmp_path / "rocketmq_orders"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns("__pycache__"))
    spec = project / "spark-pipeline.yml"
    text = spec.read_text().replace("127.0.0.1:9876", nameserver)
    spec.write_text(text.replace("file:///tmp/rocketspark-pipelines/rocketmq_orders", (tmp_path / "storage").as_uri()))
    return project


def _run_pipeline(project: Path) -> float:
    """``spark-pipelines run`` in ``project``; how long it took (seconds)."""
    command = [str(Path(sys.executable).parent / "spark-pipelines"), *RUN]
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    started = time.monotonic()
    done = subprocess.run(command, cwd=project, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Run is COMPLETED" in done.stdout + done.stderr
    return time.monotonic() - started


def _send(nameserver: str, first: int, count: int) -> None:
    with Producer(nameserver) as producer:
        producer.send_batch(
            [Message("orders", f"order-{i}".encode(), tags="AB"[i % 2], queue_id=i % 4) for i in range(first, count)]
        )


def _topic_bodies(spark: Any, nameserver: str, topic: str) -> list[str]:
    rows = (
        spark.read.format("rocketmq")
        .option("nameserver", nameserver)
        .option("topic", topic)
        .load()
        .selectExpr("CAST(body AS STRING) AS body")
        .collect()
    )
    return sorted(r.body for r in rows)


def test_the_pipeline_lands_every_message_once_in_its_table_and_its_out_topic_across_runs(
    spark: Any, cluster: LocalCluster, tmp_path: Path
) -> None:
    with Admin(cluster.nameserver) as admin:
        admin.create_topic("orders", 4)
        admin.create_topic("orders-audited", 4)
    project = _project(tmp_path, cluster.nameserver)
    warehouse = project / "spark-warehouse"
    took = []
    for first, sent in ((0, 600), (600, 1000)):  # a first run, then a run of the same pipeline over 400 more
        _send(cluster.nameserver, first, sent)
        took.append(_run_pipeline(project))
        expected = sorted(f"order-{i}" for i in range(sent))
        table = spark.read.parquet(str(warehouse / "orders"))
        assert sorted(r.body for r in table.select("body").collect()) == expected
        assert _topic_bodies(spark, cluster.nameserver, "orders-audited") == expected
        by_tag = {r.tag: r.orders for r in spark.read.parquet(str(warehouse / "orders_by_tag")).collect()}
        assert by_tag == {"A": sent // 2, "B": sent // 2}
    print(f"spark-pipelines run took {took[0]:.0f} s, then {took[1]:.0f} s")
