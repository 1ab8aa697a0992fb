"""The Spark Declarative Pipelines example runs as its docs say (docs/spark/pipelines.md): the
page's commands, verbatim but for the cluster's address, with ``spark-pipelines run`` a real
subprocess that starts its own Spark Connect server.

The pipeline (examples/pipelines/rocketmq_orders) reads a topic into a streaming table,
aggregates the table in a materialized view and writes the table's rows to another topic through
a rocketmq sink. Its tables are read back here from their files: the pipeline's Hive catalog is
an embedded Derby that one process at a time may open.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from rocketspark import LocalCluster, Message, Producer
from tests.docblocks import blocks_run_by, logical_lines

pytestmark = [pytest.mark.spark, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = "examples/pipelines/rocketmq_orders"
DOCS_ADDRESS = "127.0.0.1:9876"
TEST = "test_the_pipeline_lands_every_message_once_in_its_table_and_its_out_topic_across_runs"


def _checkout(tmp_path: Path, nameserver: str) -> Path:
    """A directory laid out as the repository's root where the docs' commands run: the example
    (pointed at this cluster and a storage of its own) and ``.venv`` (this interpreter's)."""
    project = tmp_path / EXAMPLE
    shutil.copytree(ROOT / EXAMPLE, project, ignore=shutil.ignore_patterns("__pycache__"))
    spec = project / "spark-pipeline.yml"
    text = spec.read_text().replace(DOCS_ADDRESS, nameserver)
    spec.write_text(text.replace("file:///tmp/rocketspark-pipelines/rocketmq_orders", (tmp_path / "storage").as_uri()))
    (tmp_path / ".venv").symlink_to(Path(sys.executable).parent.parent)
    return tmp_path


def _bash(script: str, cwd: Path, nameserver: str) -> str:
    """Run ``script`` as a user pastes it; its output. Generous bound: a run takes 45-90 s."""
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script.replace(DOCS_ADDRESS, nameserver)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Run is COMPLETED" in done.stdout + done.stderr
    return done.stdout


def _check(spark: Any, nameserver: str, warehouse: Path, totals: dict[str, tuple[int, float]]) -> None:
    """Each message of ``orders`` once in the table and once in ``orders-audited`` (by the key
    ``<queueId>:<queueOffset>`` the sink gives it), and the view's totals per customer."""
    table = spark.read.parquet(str(warehouse / "orders")).collect()
    positions = sorted(f"{r.queueId}:{r.queueOffset}" for r in table)
    assert len(set(positions)) == len(positions) == sum(n for n, _ in totals.values())
    audited = spark.read.format("rocketmq").option("nameserver", nameserver).option("topic", "orders-audited").load()
    assert sorted(k for r in audited.select("keys").collect() for k in r.keys) == positions
    view = spark.read.parquet(str(warehouse / "orders_by_customer")).collect()
    assert {r.customer: (r.orders, r.total) for r in view} == totals


def test_the_pipeline_lands_every_message_once_in_its_table_and_its_out_topic_across_runs(
    spark: Any, cluster: LocalCluster, tmp_path: Path
) -> None:
    [block] = blocks_run_by(f"tests/spark/test_pipelines.py::{TEST}")
    run = next(line for line in logical_lines(block.text) if "spark-pipelines run" in line)
    checkout = _checkout(tmp_path, cluster.nameserver)
    started = time.monotonic()
    _bash(block.text, checkout, cluster.nameserver)  # topics, 1,000 orders of c-7, a first run
    _check(spark, cluster.nameserver, checkout / "spark-warehouse", {"c-7": (1000, 12500.0)})

    with Producer(cluster.nameserver) as producer:
        more = [json.dumps({"customer": f"c-{i % 4}", "amount": 1.0}).encode() for i in range(400)]
        producer.send_batch([Message("orders", body, queue_id=i % 4) for i, body in enumerate(more)])
    _bash(run, checkout, cluster.nameserver)  # the same pipeline again: only what is new
    totals = {"c-7": (1000, 12500.0), **{f"c-{i}": (100, 100.0) for i in range(4)}}
    _check(spark, cluster.nameserver, checkout / "spark-warehouse", totals)
    print(f"two runs of the pipeline took {time.monotonic() - started:.0f} s")
