"""A packaged spark-submit job (issue 14) on ``local-cluster[2,1,1024]``: two executor JVMs
whose Python workers run the interpreter the job's archive ships, made by ``rocketspark
package-job``. The job reads a static topic and writes another, exactly once; the rows say
which interpreter made them. Mistakes get errors that name the spark-submit option to fix."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocketspark import Admin, Consumer, LocalCluster, Message, Producer

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
JOB = ROOT / "examples" / "packaged_job.py"
SPARK_SUBMIT = Path(sys.executable).with_name("spark-submit")
MESSAGES = 600


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The job's archive, made the way the docs (docs/spark/cluster.md) make it, by rocketspark
    as installed (not editable, no PYTHONPATH) and outside the checkout: it finds the tree pip
    installed it from."""
    out = tmp_path_factory.mktemp("package") / "job-env.tar.gz"
    done = subprocess.run(
        [sys.executable, "-m", "rocketspark.cli", "package-job", str(JOB), "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=out.parent,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )
    assert done.returncode == 0, done.stderr + done.stdout
    assert f"--archives '{out}#environment'" in done.stdout
    return out


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


@pytest.fixture(scope="module", autouse=True)
def executors_work_dir() -> Iterator[None]:
    """local-cluster's executors work under the Spark installation: what they leave goes."""
    work = spark_home() / "work"
    before = set(work.iterdir()) if work.is_dir() else set()
    yield
    for app in (set(work.iterdir()) if work.is_dir() else set()) - before:
        shutil.rmtree(app, ignore_errors=True)


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(brokers=2, processes=True, console=False) as cluster, Admin(cluster.nameserver) as admin:
        admin.create_static_topic("orders", 4)
        admin.create_topic("orders-enriched", 2)
        with Producer(cluster.nameserver) as producer:
            producer.send_batch([Message("orders", f"order {i}".encode(), queue_id=i % 4) for i in range(MESSAGES)])
        yield cluster


def unpack(archive: Path, into: Path, drop: tuple[str, ...] = ()) -> Path:
    """The archive unpacked (what --archives does on an executor), less ``drop``'s directories."""
    into.mkdir(parents=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="tar")
    for site in into.glob("lib/python*/site-packages"):
        for name in drop:
            shutil.rmtree(site / name, ignore_errors=True)
    return into


def submit(
    work: Path, cluster: LocalCluster, *options: str, checkpoint: str = "cp"
) -> subprocess.CompletedProcess[str]:
    """spark-submit in client mode from ``work``: every Python runs ./environment/bin/python (on
    this host the driver and the workers Spark starts beside it for planning, from the archive
    unpacked here; on the executors, the archive's), with no PYTHONPATH of ours."""
    drop = ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")  # nothing of ours reaches a worker but the archive
    env = {k: v for k, v in os.environ.items() if k not in drop} | {"SPARK_HOME": str(spark_home())}
    command = [
        str(SPARK_SUBMIT),
        "--master",
        "local-cluster[2,1,1024]",
        "--conf",
        "spark.pyspark.python=./environment/bin/python",
        "--conf",
        "spark.ui.enabled=false",
        "--conf",  # both executors take part: no task runs before both have registered
        "spark.scheduler.minRegisteredResourcesRatio=1.0",
        "--conf",
        "spark.scheduler.maxRegisteredResourcesWaitingTime=120s",
        *options,
        str(JOB),
        "--nameserver",
        cluster.nameserver,
        "--source",
        "orders",
        "--sink",
        "orders-enriched",
        "--checkpoint",
        str(work / checkpoint),
    ]
    return subprocess.run(command, cwd=work, capture_output=True, text=True, timeout=600, env=env)


def sent_rows(cluster: LocalCluster) -> list[dict[str, object]]:
    with Consumer(cluster.nameserver) as consumer:
        queues = [q.queue_id for q in consumer.queues("orders-enriched")]
        return [
            json.loads(m.body) for q in queues for r in consumer.iter_range("orders-enriched", q, 0) for m in r.messages
        ]


def test_a_packaged_job_runs_on_executors_without_rocketspark(
    archive: Path, cluster: LocalCluster, tmp_path: Path
) -> None:
    unpack(archive, tmp_path / "environment")  # the driver's Python workers plan the reads with it too
    started = time.monotonic()
    done = submit(tmp_path, cluster, "--archives", f"{archive}#environment")
    first_s = time.monotonic() - started
    assert done.returncode == 0, done.stderr[-4000:]
    assert f"copied {MESSAGES} messages" in done.stdout
    rows = sent_rows(cluster)
    assert sorted(r["body"] for r in rows) == sorted(f"order {i}" for i in range(MESSAGES))  # exactly once
    pythons = {Path(str(r["python"])) for r in rows}  # <spark work>/app-<id>/<executor>/environment/bin/python
    assert all(str(p).endswith("/environment/bin/python") and p.parents[3].name.startswith("app-") for p in pythons)
    assert len({p.parents[2] for p in pythons}) == 2  # both executors, each in its own unpacked archive
    assert tmp_path / "environment" / "bin" / "python" not in pythons  # not the driver's copy
    for row in rows:  # and each imported rocketspark from its own unpacked archive
        environment = Path(str(row["python"])).parents[1]
        assert Path(str(row["rocketspark"])).is_relative_to(environment / "lib"), row

    # the last batch's commit lost (a driver that died after the sink wrote, before Spark
    # recorded it): the run again replays the whole batch on the executors, which store nothing twice
    commits = tmp_path / "cp" / "commits"
    last = max(int(f.name) for f in commits.iterdir() if f.name.isdigit())
    for name in (str(last), f".{last}.crc"):  # the file and Hadoop's checksum beside it
        (commits / name).unlink(missing_ok=True)
    again = submit(tmp_path, cluster, "--archives", f"{archive}#environment")
    assert again.returncode == 0, again.stderr[-4000:]
    assert f"copied {MESSAGES} messages" in again.stdout  # replayed in full
    assert sorted(r["body"] for r in sent_rows(cluster)) == sorted(f"order {i}" for i in range(MESSAGES))
    print(f"spark-submit of the packaged job: {first_s:.0f} s, the replay {time.monotonic() - started - first_s:.0f} s")


def test_the_python_the_archive_runs_on_has_no_rocketspark_of_its_own(archive: Path, tmp_path: Path) -> None:
    """The archive's python is a link to the nodes' Python (pyvenv.cfg's home): that Python,
    run as a worker runs it, cannot import rocketspark, so only the archive provides it."""
    environment = unpack(archive, tmp_path / "environment")
    home = next(
        line.split("=", 1)[1].strip()
        for line in (environment / "pyvenv.cfg").read_text().splitlines()
        if line.startswith("home")
    )
    base = Path(home) / "python3"
    assert base.exists(), base
    probe = subprocess.run(  # no PYTHONPATH of ours, not from the source tree
        [str(base), "-c", "import rocketspark"], capture_output=True, text=True, cwd="/", env={"PATH": "/usr/bin:/bin"}
    )
    assert probe.returncode != 0 and "No module named 'rocketspark'" in probe.stderr


def test_an_archive_without_rocketspark_is_named_not_a_module_error(
    archive: Path, cluster: LocalCluster, tmp_path: Path
) -> None:
    unpack(archive, tmp_path / "environment")
    broken = unpack(archive, tmp_path / "broken", drop=("rocketspark", "pyspark_rocketmq"))
    packed = tmp_path / "broken.tar.gz"
    with tarfile.open(packed, "w:gz", compresslevel=1) as tar:
        tar.add(broken, arcname=".")
    done = submit(tmp_path, cluster, "--archives", f"{packed}#environment", checkpoint="cp-broken")
    assert done.returncode != 0
    assert "rocketspark is not installed in the Python this Spark executor runs" in done.stderr
    assert "--archives job-env.tar.gz#environment --conf spark.pyspark.python=./environment/bin/python" in done.stderr
    assert "ModuleNotFoundError: No module named 'rocketspark" not in done.stderr


def test_a_missing_archive_is_named_at_the_start(cluster: LocalCluster, tmp_path: Path) -> None:
    # the driver runs a Python of its own (client mode); the executors were to run the archive's
    done = submit(tmp_path, cluster, "--conf", f"spark.pyspark.driver.python={sys.executable}")  # no --archives
    said = done.stdout + done.stderr  # spark-submit passes the driver's traceback on to its stdout
    assert done.returncode != 0
    assert "ConfigError: spark.pyspark.python is ./environment/bin/python, but no archive is unpacked as" in said
    assert "--archives job-env.tar.gz#environment" in said
    assert "job started" not in said  # named before the session started
