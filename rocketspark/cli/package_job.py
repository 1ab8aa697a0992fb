"""``rocketspark package-job``: pack rocketspark and its dependencies (not pyspark, which the
cluster provides) into one archive that spark-submit ships to executors that have never heard
of rocketspark.

The archive is a packed virtualenv (``venv-pack``, the first method of Spark's "Python Package
Management" guide): ``--archives job-env.tar.gz#environment`` unpacks it in every executor's
working directory, and ``spark.pyspark.python=./environment/bin/python`` makes the executors'
Python workers run it. pyspark itself stays out: Spark puts its own ``pyspark.zip`` on every
Python worker's path. A packed virtualenv runs the same Python as the one it was made with, at
the same path: build it with the nodes' Python (``--python``).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rocketspark.cli.common import say
from rocketspark.errors import ConfigError

DISTRIBUTION = "rocketspark"
PROVIDED = {"pyspark"}  # what every Spark cluster's Python workers already have
ENV_NAME = "environment"  # the directory spark-submit unpacks the archive into (the #fragment)


def requirements() -> list[str]:
    """rocketspark's own dependencies, as installed, without the ones the cluster provides."""
    out = []
    for spec in importlib.metadata.requires(DISTRIBUTION) or []:
        if "extra ==" in spec:
            continue
        name = re.split(r"[<>=!~;\[ ]", spec, maxsplit=1)[0].strip().lower().replace("_", "-")
        if name not in PROVIDED:
            out.append(spec.split(";")[0].strip())
    return out


def project_source() -> str:
    """What pip installs rocketspark from: this checkout when run from one, else the index at
    this very version."""
    root = Path(__file__).resolve().parents[2]
    if (root / "pyproject.toml").is_file() and (root / "rocketspark").is_dir():
        return str(root)
    return f"{DISTRIBUTION}=={importlib.metadata.version(DISTRIBUTION)}"


INSTALLERS = ("pip", "setuptools", "wheel")  # what made the environment; a job never runs them
UNUSED = ("pyarrow/include", "pyarrow/tests", "numpy/*/tests", "numpy/tests", "*/__pycache__")  # nor reads these


def trim(env: Path) -> None:
    """Leave out what no job imports: headers, test suites, bytecode (workers compile it)."""
    for site in env.glob("lib/python*/site-packages"):
        for pattern in UNUSED:
            for found in site.glob(pattern):
                if found.is_dir():
                    shutil.rmtree(found)


def _run(command: list[str], what: str) -> None:
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise ConfigError(f"package-job: {what} failed: {(done.stderr or done.stdout).strip()[-2000:]}")


def build(output: Path, python: str) -> tuple[int, float]:
    """Make the archive at ``output``; its size in bytes and the seconds it took."""
    import venv_pack  # the packing library; an optional dependency: rocketspark[package]

    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="rocketspark-job-") as tmp:
        env = Path(tmp) / "env"
        _run([python, "-m", "venv", str(env)], f"making a virtualenv with {python}")
        python_in = str(env / "bin" / "python")
        pip = [python_in, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-compile"]
        _run([*pip, *requirements()], "installing rocketspark's dependencies")
        _run([*pip, "--no-deps", project_source()], "installing rocketspark")
        _run([python_in, "-m", "pip", "uninstall", "--quiet", "-y", *INSTALLERS], "removing the installers")
        trim(env)
        probe = "import importlib.util as u; assert u.find_spec('rocketspark') and u.find_spec('pyspark_rocketmq')"
        _run([str(env / "bin" / "python"), "-c", probe], "checking the packed environment")
        output.parent.mkdir(parents=True, exist_ok=True)
        venv_pack.pack(prefix=str(env), output=str(output), force=True, verbose=False, compress_level=4)
    return output.stat().st_size, time.monotonic() - started


def submit_line(archive: Path, job: str) -> str:
    return f"spark-submit --archives {archive}#{ENV_NAME} --conf spark.pyspark.python=./{ENV_NAME}/bin/python {job}"


def package_job(args: argparse.Namespace) -> int:
    output = Path(args.output)
    if not Path(args.job).is_file():
        raise ConfigError(f"package-job: no job file {args.job}: give the job script spark-submit runs")
    size, seconds = build(output, args.python)
    mib = size / 2**20
    say(f"packed rocketspark and its dependencies (not pyspark) into {output}: {mib:.1f} MiB in {seconds:.0f} s")
    say(f"run it with:\n  {submit_line(output, args.job)}")
    return 0


def add_parser(sub: Any) -> None:
    p = sub.add_parser("package-job", help="pack rocketspark for a job's executors (spark-submit --archives)")
    p.add_argument("job", help="the job script (spark-submit's main file; it is not packed)")
    p.add_argument("-o", "--output", default="job-env.tar.gz", help="the archive to write")
    p.add_argument(
        "--python",
        default=os.environ.get("ROCKETSPARK_PACK_PYTHON", sys.executable),
        help="the Python the executors run (same version and path on every node); default: this one",
    )
    p.set_defaults(func=package_job)
