"""The examples run as a user runs them: the notebook with nbclient, the job with spark-submit."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from rocketspark import Admin, LocalCluster, Message, Producer

pytestmark = [pytest.mark.spark, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]


def test_the_notebook_runs_top_to_bottom(tmp_path: Path) -> None:
    notebook = nbformat.read(ROOT / "examples" / "quickstart.ipynb", as_version=4)
    client = NotebookClient(
        notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()
    outputs = "".join(o.get("text", "") for cell in notebook.cells for o in cell.get("outputs", []))
    assert "offsets behind latest" in outputs and "moved:" in outputs


def test_the_spark_submit_job_copies_a_topic_incrementally(tmp_path: Path) -> None:
    submit = Path(sys.executable).parent / "spark-submit"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    with LocalCluster(brokers=2, processes=True) as cluster:
        with Admin(cluster.nameserver) as admin:
            admin.create_static_topic("shipped", 4)
        args = [
            str(submit),
            "--master",
            "local[2]",
            "--conf",
            "spark.ui.enabled=false",
            str(ROOT / "examples" / "spark_submit_job.py"),
            "--nameserver",
            cluster.nameserver,
            "--topic",
            "shipped",
            "--output",
            str(tmp_path / "out"),
            "--checkpoint",
            str(tmp_path / "cp"),
        ]
        for run, count in enumerate((500, 300)):
            with Producer(cluster.nameserver) as producer:
                producer.send_batch([Message("shipped", f"{run}-{i}".encode(), queue_id=i % 4) for i in range(count)])
            done = subprocess.run(args, capture_output=True, text=True, env=env, timeout=300)
            assert done.returncode == 0, done.stderr[-3000:]
            assert f"copied {count} new messages; {500 + 300 * run} in" in done.stdout
