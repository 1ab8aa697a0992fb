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
    """rocketspark's own dependencies as installed (markers kept, for pip to weigh on the
    target Python), without extras and without what the cluster provides."""
    try:
        from packaging.requirements import Requirement
    except ImportError:
        raise ConfigError("package-job needs packaging: pip install 'rocketspark[package]'") from None

    try:
        specs = importlib.metadata.requires(DISTRIBUTION) or []
    except importlib.metadata.PackageNotFoundError:
        raise ConfigError(
            "package-job needs rocketspark installed where it runs (pip install 'rocketspark[package]'): "
            "it packs the same dependencies"
        ) from None
    out = []
    for spec in specs:
        requirement = Requirement(spec)
        if requirement.marker is not None and "extra" in str(requirement.marker):
            continue
        if requirement.name.lower().replace("_", "-") not in PROVIDED:
            out.append(str(requirement))
    return out


def project_source(given: str | None) -> str:
    """What pip installs rocketspark from: ``--source`` (a wheel or a source tree), else this
    checkout when run from one, else the package index at this very version."""
    if given is not None:
        if not Path(given).exists():
            raise ConfigError(f"package-job: --source {given} does not exist: give a rocketspark wheel or source tree")
        return given
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


# What the packed Python must import, the binary dependencies included (pyspark is the
# cluster's, so the connector's own module is only looked for): an archive that cannot is
# refused here, not on the executors.
PROBE = (
    "import importlib.util, rocketspark.client, grpc, pyarrow, numpy, msgpack; "
    "assert importlib.util.find_spec('pyspark_rocketmq'), 'pyspark_rocketmq is missing'"
)


def _run(command: list[str], what: str, cwd: str | None = None) -> None:
    """Run a step of the build; a failure is a ConfigError carrying the step's own output. No
    PYTHONPATH reaches it: the packed Python must find everything in itself."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=cwd)
    if done.returncode != 0:
        raise ConfigError(f"package-job: {what} failed: {(done.stderr or done.stdout).strip()[-2000:]}")


def _packer() -> Any:
    try:
        import venv_pack  # the packing library; an optional dependency
    except ImportError:
        raise ConfigError("package-job needs venv-pack: pip install 'rocketspark[package]'") from None
    return venv_pack


def build(
    output: Path, python: str, given_source: str | None = None, extra: list[str] | None = None
) -> tuple[int, float]:
    """Make the archive at ``output`` with ``python``, rocketspark from ``given_source`` (see
    :func:`project_source`) and the job's own ``extra`` requirements files; its size in bytes
    and the seconds it took."""
    packer = _packer()
    wanted, source = requirements(), project_source(given_source)  # their mistakes named before any work
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="rocketspark-job-") as tmp:
        env = Path(tmp) / "env"
        _run([python, "-m", "venv", str(env)], f"making a virtualenv with {python} (--python)")
        python_in = str(env / "bin" / "python")
        pip = [python_in, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-compile"]
        _run([*pip, *wanted], "installing rocketspark's dependencies")
        _run([*pip, "--no-deps", source], "installing rocketspark")
        for requirements_file in extra or []:
            _run([*pip, "-r", requirements_file], f"installing the job's requirements ({requirements_file})")
        _run([python_in, "-m", "pip", "uninstall", "--quiet", "-y", *INSTALLERS], "removing the installers")
        trim(env)
        _run([python_in, "-c", PROBE], "importing rocketspark and its binary dependencies in the packed Python", tmp)
        output.parent.mkdir(parents=True, exist_ok=True)
        packer.pack(prefix=str(env), output=str(output), force=True, verbose=False, compress_level=4)
    return output.stat().st_size, time.monotonic() - started


def submit_line(archive: Path, job: str) -> str:
    """The spark-submit options that ship ``archive`` and make the workers run its Python."""
    return f"spark-submit --archives {archive}#{ENV_NAME} --conf spark.pyspark.python=./{ENV_NAME}/bin/python {job}"


def check_arguments(args: argparse.Namespace) -> None:
    """Every mistake in the command line named before anything is built (a build takes a while)."""
    if not Path(args.job).is_file():
        raise ConfigError(f"package-job: no job file {args.job}: give the job script spark-submit runs")
    if shutil.which(args.python) is None:
        raise ConfigError(
            f"package-job: --python {args.python} is not a Python found here: give the path of the Python the "
            "cluster's nodes run (same version, same path)"
        )
    for requirements_file in args.requirement:
        if not Path(requirements_file).is_file():
            raise ConfigError(f"package-job: no requirements file {requirements_file} (-r)")
    project_source(args.source)


def package_job(args: argparse.Namespace) -> int:
    """The command: check, build, and print the spark-submit line to use."""
    check_arguments(args)
    output = Path(args.output)
    size, seconds = build(output, args.python, args.source, args.requirement)
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
        help="the Python the executors run (same version and path on every node); default: this one "
        "($ROCKETSPARK_PACK_PYTHON)",
    )
    p.add_argument("--source", help="rocketspark to pack: a wheel or source tree (default: this checkout or version)")
    p.add_argument(
        "-r", "--requirement", action="append", default=[], help="also install the job's own requirements file"
    )
    p.set_defaults(func=package_job)
