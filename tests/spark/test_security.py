"""Spark against a cluster with users and TLS on: with credentials it reads and writes,
without them it fails when it starts with one sentence, and no secret is left anywhere."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from rocketspark import Admin, Consumer, LocalCluster

HERE = Path(__file__).parent


def test_spark_with_credentials_reads_and_writes_and_leaves_no_secret_behind(tmp_path: Path) -> None:
    secret = "etl-" + os.urandom(12).hex()
    with LocalCluster(brokers=1, processes=True, auth=True, tls=True) as cluster:
        with Admin(cluster.nameserver, **cluster.client_options) as admin:
            admin.create_topic("orders", queues=2)
            admin.create_topic("copy", queues=2)
            admin.create_user("etl", secret)
            admin.set_acl("etl", "Topic:orders", ["Pub", "Sub"])
            admin.set_acl("etl", "Topic:copy", ["Pub"])
        args = [
            str(Path(sys.executable).parent / "spark-submit"),
            *("--master", "local[2]", "--conf", "spark.ui.enabled=false"),
            str(HERE / "secure_job.py"),
            *("--nameserver", cluster.nameserver, "--ca", str(cluster.tls_ca_file)),
            *("--access-key", "etl", "--secret-key", secret),
            *("--checkpoint", str(tmp_path / "checkpoint"), "--events", str(tmp_path / "events")),
        ]
        (tmp_path / "events").mkdir()
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
        done = subprocess.run(args, capture_output=True, text=True, env=env, timeout=600)
        assert done.returncode == 0, done.stderr[done.stderr.find("Traceback") :][:4000]
        out = done.stdout
        assert "READ 100" in out and "STREAMED 100" in out, out[-3000:]
        with Consumer(cluster.nameserver, **cluster.client_options) as consumer:
            assert sum(len(consumer.pull("copy", q, 0, 1000).messages) for q in range(2)) == 100

        hint = 'set the options "accessKey" and "secretKey" to a user of the cluster'
        for what in ("READ", "WRITE", "STREAM"):
            line = next((x for x in out.splitlines() if x.startswith(f"REFUSED {what} ")), "")
            assert "refused this query's" in line and hint in line, (what, out[-3000:])
            assert "the request is not signed" in line

        (tmp_path / "job.log").write_text(out + done.stderr)
        server_logs = list(cluster.data_dir.glob("*.log"))
        assert server_logs
        leaks = [
            str(path)
            for root in (tmp_path, *server_logs)
            for path in ([root] if root.is_file() else root.rglob("*"))
            if path.is_file() and secret.encode() in path.read_bytes()
        ]
        assert leaks == [], f"the secret was found in {leaks}"
        assert "== Physical Plan ==" in out  # EXPLAIN ran, and printed no secret
        assert any((tmp_path / "checkpoint").rglob("offsets/*")) and any((tmp_path / "events").iterdir())
