"""The packaged-job walkthrough as a newcomer runs it: a fresh shell (``env -i``: no venv on
PATH, no PYTHONPATH, no SPARK_HOME) in a fresh copy of the checkout after ``make run`` (the
checkout's .venv, rocketspark installed from it, not editable). The sidecar cluster, a static
topic, ``package-job`` with the job's arguments, then the lines package-job printed, run as
printed: the spark-submit line is complete (master, archive, job arguments) and works as pasted.
"""

from __future__ import annotations

import itertools
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import docs_text

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / ".venv"
MESSAGES = 100

# Before the docs' block: the cluster the docs start "in another terminal", in the background on a
# free port, here.
CLUSTER = """
set -eo pipefail
.venv/bin/rocketspark cluster up --brokers 2 --port {port} > cluster.log 2>&1 &
CLUSTER=$!
trap 'kill $CLUSTER; wait $CLUSTER || true' EXIT
for i in $(seq 60); do .venv/bin/rocketspark admin -n 127.0.0.1:{port} clusters > /dev/null 2>&1 && break; sleep 1; done
"""
MARKER = "<!-- run by tests/integration/test_package_walkthrough.py::"


def docs_walkthrough() -> str:
    """The bash block of docs/spark/cluster.md marked as run by this test, as printed."""
    text = docs_text("spark/cluster.md")
    assert MARKER in text, "docs/spark/cluster.md lost the walkthrough this test runs"
    return text[text.index(MARKER) :].split("```bash\n", 1)[1].split("```", 1)[0]


def joined(lines: str) -> list[str]:
    """Shell lines with their continuations joined, spaces normalised."""
    return [" ".join(line.split()) for line in lines.replace("\\\n", " ").splitlines() if line.strip()]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def fresh_clone(into: Path) -> Path:
    """The checkout's files as git sees them (committed or not, never ignored), with the .venv
    that ``make run`` made in it."""
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True, check=True
    )
    for name in filter(None, listed.stdout.decode().split("\0")):
        source = ROOT / name
        if source.is_file() and "node_modules" not in source.parts:
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, into / name)
    (into / ".venv").symlink_to(VENV)
    return into


def test_the_walkthrough_runs_as_written_from_a_fresh_shell(tmp_path: Path) -> None:
    if not (VENV / "bin" / "spark-submit").exists() or Path(sys.prefix).resolve() != VENV.resolve():
        pytest.skip("runs with the checkout's .venv (make test), which the walkthrough activates")
    clone = fresh_clone(tmp_path / "rocketspark")
    port = free_port()
    block = docs_walkthrough()
    script = CLUSTER.format(port=port) + block.replace("127.0.0.1:9876", f"127.0.0.1:{port}")
    fresh = {"HOME": os.environ.get("HOME", str(tmp_path)), "PATH": "/usr/local/bin:/usr/bin:/bin"}
    done = subprocess.run(
        ["env", "-i", *(f"{k}={v}" for k, v in fresh.items()), "bash", "--noprofile", "--norc", "-c", script],
        cwd=clone,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    assert f"packing rocketspark from {clone} (the checkout package-job runs in" in done.stdout
    after = done.stdout.split("run it with:\n", 1)[1].splitlines()
    printed = joined("\n".join(itertools.takewhile(lambda line: line.startswith("  "), after)))
    documented = joined(block.replace("127.0.0.1:9876", f"127.0.0.1:{port}"))
    assert printed[-2:] == documented[-2:], "the docs' last two lines are what package-job prints"
    assert f"copied {MESSAGES} messages from orders to orders-copy" in done.stdout
    assert "Arrow optimization failed to enable" not in done.stderr  # pandas is in the archive
    assert "does not yet fully support pandas" not in done.stderr
    assert "Could not find valid SPARK_HOME" not in done.stderr
