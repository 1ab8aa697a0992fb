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
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.markup import escape

from rocketspark.cli.common import say
from rocketspark.cli.pack_source import DISTRIBUTION, Source, project_source, pyspark_sql_requirements
from rocketspark.errors import ConfigError

PROVIDED = {"pyspark"}  # what every Spark cluster's Python workers already have
ENV_NAME = "environment"  # the directory spark-submit unpacks the archive into (the #fragment)


def requirements() -> list[str]:
    """rocketspark's own dependencies as installed (markers kept, for pip to weigh on the
    target Python), without extras and without what the cluster provides, and what pyspark's
    sql extra adds (pandas: see :func:`pyspark_sql_requirements`)."""
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
    return out + pyspark_sql_requirements()


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
    "import importlib.util, rocketspark.client, grpc, pyarrow, numpy, msgpack, pandas; "
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


def build(output: Path, python: str, source: Source | None = None, extra: list[str] | None = None) -> tuple[int, float]:
    """Make the archive at ``output`` with ``python``, rocketspark from ``source`` (by default
    what :func:`project_source` finds) and the job's own ``extra`` requirements files; its size
    in bytes and the seconds it took."""
    packer = _packer()
    wanted, source = requirements(), source or project_source(None)  # their mistakes named before any work
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="rocketspark-job-") as tmp:
        env = Path(tmp) / "env"
        _run([python, "-m", "venv", str(env)], f"making a virtualenv with {python} (--python)")
        python_in = str(env / "bin" / "python")
        pip = [python_in, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-compile"]
        _run([*pip, *wanted], "installing rocketspark's dependencies")
        _run([*pip, "--no-deps", source.spec], source.installing())
        for requirements_file in extra or []:
            _run([*pip, "-r", requirements_file], f"installing the job's requirements ({requirements_file})")
        _run([python_in, "-m", "pip", "uninstall", "--quiet", "-y", *INSTALLERS], "removing the installers")
        trim(env)
        _run([python_in, "-c", PROBE], "importing rocketspark and its binary dependencies in the packed Python", tmp)
        output.parent.mkdir(parents=True, exist_ok=True)
        packer.pack(prefix=str(env), output=str(output), force=True, verbose=False, compress_level=4)
    return output.stat().st_size, time.monotonic() - started


def activation() -> Path | None:
    """The venv's activate script, when spark-submit must run with it and this shell lacks it.
    pyspark's ``spark-submit`` finds its SPARK_HOME by running ``find_spark_home.py`` with the
    ``python3`` on PATH ($PYSPARK_DRIVER_PYTHON or $PYSPARK_PYTHON if set): called as
    ``.venv/bin/spark-submit`` from a shell whose python3 is another, it fails with "Could not
    find valid SPARK_HOME". None when this Python is no venv with pyspark, or PATH already
    leads to it."""
    bin_dir = Path(sys.executable).parent
    if sys.prefix == sys.base_prefix or not (bin_dir / "spark-submit").exists():
        return None
    if not (bin_dir / "activate").is_file():
        return None
    python3 = shutil.which("python3")
    return None if python3 is not None and Path(python3).parent == bin_dir else bin_dir / "activate"


def submit_lines(archive: Path, job: str, master: str, job_args: list[str]) -> list[str]:
    """The commands that run ``job`` with ``archive``, complete, as the person types them: the
    venv activated when spark-submit needs it, the archive unpacked here (in client mode, the
    default, the driver and the Python workers Spark starts beside it run
    ``./environment/bin/python`` too), then spark-submit with the master and the job's arguments."""
    activate = activation()
    lines = [f"source {shlex.quote(str(activate))}"] if activate is not None else []
    lines.append(f"mkdir -p {ENV_NAME} && tar -xzf {shlex.quote(str(archive))} -C {ENV_NAME}")
    submit = ["spark-submit", "--master", master, "--archives", f"{archive}#{ENV_NAME}"]
    submit += ["--conf", f"spark.pyspark.python=./{ENV_NAME}/bin/python", job, *job_args]
    lines.append(shlex.join(submit))
    return lines


def check_arguments(args: argparse.Namespace) -> Source:
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
    return project_source(args.source)


def package_job(args: argparse.Namespace) -> int:
    """The command: check, build, and print the commands that run the job with the archive."""
    source = check_arguments(args)
    say(escape(f"packing rocketspark from {source.spec} ({source.origin}; --source to pack another)"))
    output = Path(args.output)
    size, seconds = build(output, args.python, source, args.requirement)
    mib = size / 2**20
    say(
        escape(f"packed rocketspark and its dependencies (not pyspark) into {output}: {mib:.1f} MiB in {seconds:.0f} s")
    )
    lines = submit_lines(output, args.job, args.master, args.job_args)
    say("run it with:\n" + "\n".join(f"  {escape(line)}" for line in lines))
    if not args.job_args:
        say("(the job's own arguments go after it: give them to package-job after --, and this line has them)")
    return 0


def split_job_arguments(words: list[str]) -> tuple[list[str], list[str]]:
    """``package-job job.py -o x.tar.gz -- --nameserver ...``: the words after ``--`` are the
    job's, taken before argparse sees them (argparse in Python 3.11 refuses a ``--`` that
    follows an option given after the job)."""
    if "package-job" not in words or "--" not in words[words.index("package-job") :]:
        return words, []
    at = words.index("--", words.index("package-job"))
    return words[:at], words[at + 1 :]


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
    p.add_argument(
        "--source",
        help="rocketspark to pack: a wheel or source tree (default: the checkout package-job runs in, or the "
        "one rocketspark was installed from, else this version from the package index)",
    )
    p.add_argument(
        "--master",
        default="local[2]",
        help="the master in the spark-submit line printed (yarn, spark://host:7077, ...)",
    )
    p.add_argument(
        "job_args", nargs="*", metavar="-- JOB_ARGUMENTS", help="the job's own arguments, for the line printed"
    )
    p.add_argument(
        "-r", "--requirement", action="append", default=[], help="also install the job's own requirements file"
    )
    p.set_defaults(func=package_job)
