"""The main job (``make run``), which runs the streaming ETL example, as a user runs it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]


def test_the_main_job_runs_the_etl_through_a_remap_and_a_failover_and_checks_its_output() -> None:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "main_job.py")], capture_output=True, text=True, timeout=600, env=env
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "remapped orders logical queue 0 mid-stream: broker-a -> broker-c" in done.stdout
    assert "killed broker-a's master" in done.stdout and "rejoins broker-a as a slave" in done.stdout
    assert "20000 input rows (as many as events produced: True)" in done.stdout
    assert "all 40 customer totals match the events produced: True" in done.stdout
    assert done.stdout.rstrip().endswith("cluster stopped")
