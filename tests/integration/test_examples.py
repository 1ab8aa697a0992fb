"""The examples and the main job run as a user would run them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def test_the_main_job_produces_consumes_and_reports() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "main_job.py")], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "consumed 5000 events" in done.stdout
    assert "lag after commit: 0" in done.stdout
    assert done.stdout.rstrip().endswith("cluster stopped")
