"""A packaged spark-submit job (``rocketspark package-job``): the archive's size and build
time, and how long spark-submit takes to start and to finish a job whose executors get
rocketspark only from the archive, against a ceiling measured in the same run: the same job
with executors whose Python already has rocketspark (nothing shipped, nothing unpacked).

With ``--pex`` (needs ``pip install pex``) it also builds a PEX file of the same requirements,
the other method of Spark's "Python Package Management" guide, for its size and build time.

Each submit runs ``examples/packaged_job.py`` on ``local-cluster[2,1,1024]`` (two executor
JVMs) against a LocalCluster, with a fresh checkpoint, so every run copies the whole topic.
Usage: ``python benchmarks/bench_package_job.py [--messages N] [--rounds R] [--pex]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rocketspark import Admin, LocalCluster, Message, Producer, compiled
from rocketspark.cli import package_job

ROOT = Path(__file__).resolve().parent.parent
JOB = ROOT / "examples" / "packaged_job.py"
SPARK_SUBMIT = Path(sys.executable).with_name("spark-submit")


def build_archive(out: Path) -> tuple[int, float]:
    return package_job.build(out, sys.executable)


def build_pex(out: Path) -> tuple[int, float] | None:
    pex = shutil.which("pex") or str(Path(sys.executable).with_name("pex"))
    if not Path(pex).exists():
        print("  pex: not installed (pip install pex), skipped")
        return None
    started = time.monotonic()
    exclude = [arg for name in package_job.PROVIDED for arg in ("--exclude", name)]  # the cluster has them
    command = [pex, *package_job.requirements(), str(ROOT), *exclude, "--no-compile", "-o", str(out)]
    subprocess.run(command, check=True, capture_output=True)
    return out.stat().st_size, time.monotonic() - started


def unpacked_bytes(archive: Path, into: Path) -> int:
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="tar")
    return sum(f.stat().st_size for f in into.rglob("*") if f.is_file() and not f.is_symlink())


def submit(work: Path, nameserver: str, python: str, archive: Path | None, run: int) -> tuple[float, float]:
    """(seconds to a running SparkSession, seconds in all) of one spark-submit from ``work``."""
    drop = ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")
    import pyspark

    env = {k: v for k, v in os.environ.items() if k not in drop} | {"SPARK_HOME": str(Path(pyspark.__file__).parent)}
    shipped = ["--archives", f"{archive}#environment"] if archive else []
    command = [
        str(SPARK_SUBMIT),
        "--master",
        "local-cluster[2,1,1024]",
        "--conf",
        f"spark.pyspark.python={python}",
        "--conf",
        "spark.ui.enabled=false",
        *shipped,
        str(JOB),
        *("--nameserver", nameserver, "--source", "orders", "--sink", f"copy-{run}"),
        *("--checkpoint", str(work / f"cp-{run}")),
    ]
    started = time.monotonic()
    session_s = 0.0
    with subprocess.Popen(
        command, cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    ) as p:
        assert p.stdout is not None
        for line in p.stdout:
            if line.startswith("job started") and not session_s:
                session_s = time.monotonic() - started
    if p.returncode != 0:
        raise RuntimeError(f"spark-submit failed ({p.returncode}): {' '.join(command)}")
    return session_s, time.monotonic() - started


def main() -> None:
    compiled.require_fresh()  # the checkout's build, as the source is now
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=600)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--pex", action="store_true", help="also build a PEX of the same requirements")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-package-") as tmp:
        work = Path(tmp)
        archive = work / "job-env.tar.gz"
        size, seconds = build_archive(archive)
        unpacked = unpacked_bytes(archive, work / "environment")  # the driver's copy (client mode)
        print(
            f"venv-pack archive: {size / 2**20:.0f} MiB ({unpacked / 2**20:.0f} MiB unpacked), built in {seconds:.0f} s"
        )
        if args.pex:
            made = build_pex(work / "job.pex")
            if made:
                print(f"PEX of the same requirements: {made[0] / 2**20:.0f} MiB, built in {made[1]:.0f} s")
        with LocalCluster(brokers=2, processes=True, console=False) as cluster, Admin(cluster.nameserver) as admin:
            admin.create_static_topic("orders", 4)
            with Producer(cluster.nameserver) as producer:
                producer.send_batch([Message("orders", f"o{i}".encode(), queue_id=i % 4) for i in range(args.messages)])
            shipped: list[tuple[float, float]] = []
            installed: list[tuple[float, float]] = []
            for r in range(args.rounds):  # taking turns, so that both see the same machine
                admin.create_topic(f"copy-{2 * r}", 2)
                admin.create_topic(f"copy-{2 * r + 1}", 2)
                shipped.append(submit(work, cluster.nameserver, "./environment/bin/python", archive, 2 * r))
                installed.append(submit(work, cluster.nameserver, sys.executable, None, 2 * r + 1))
        best_shipped = min(shipped, key=lambda t: t[1])
        best_installed = min(installed, key=lambda t: t[1])
        print(f"spark-submit of a {args.messages}-message job on local-cluster[2,1,1024], best of {args.rounds}:")
        print(f"  shipped in the archive:      session {best_shipped[0]:.0f} s, done {best_shipped[1]:.0f} s")
        print(f"  ceiling, already installed:  session {best_installed[0]:.0f} s, done {best_installed[1]:.0f} s")
        print(f"  shipped / ceiling (done): {best_shipped[1] / best_installed[1]:.2f}x")


if __name__ == "__main__":
    main()
