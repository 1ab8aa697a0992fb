"""The ``rocketspark`` command: the sidecar and the admin tables, as a user runs them."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from rocketspark import LocalCluster, Message, Producer

pytestmark = pytest.mark.integration
CLI = [sys.executable, "-m", "rocketspark.cli"]


def admin(nameserver: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, "admin", "-n", nameserver, *args], capture_output=True, text=True, timeout=60)


def test_admin_commands_print_readable_tables(shared_cluster: LocalCluster, topic_name: str) -> None:
    ns = shared_cluster.nameserver
    created = admin(ns, "create-topic", topic_name, "--queues", "2")
    assert created.returncode == 0, created.stderr
    assert f'topic "{topic_name}" with 2 queues on: broker-a, broker-b' in created.stdout
    with Producer(ns) as producer:
        producer.send_batch([Message(topic_name, b"x", queue_id=3)] * 4)
    status = admin(ns, "status", topic_name)
    assert status.returncode == 0
    assert "min offset" in status.stdout and "broker-b" in status.stdout
    rows = [
        [cell.strip() for cell in line.split("│")[1:-1]] for line in status.stdout.splitlines() if line.startswith("│")
    ]
    assert ["3", "0", "4", "broker-b", "1"] in [row[:5] for row in rows]  # queue, min, max, broker, physical
    route = admin(ns, "route", topic_name)
    assert "broker-a" in route.stdout and "RW-" in route.stdout
    clusters = admin(ns, "clusters")
    assert "DefaultCluster" in clusters.stdout and shared_cluster.brokers["broker-a"] in clusters.stdout
    counters = admin(ns, "counters")
    assert "GET_ROUTEINFO_BY_TOPIC" in counters.stdout
    deleted = admin(ns, "delete-topic", topic_name)
    assert deleted.returncode == 0


def test_admin_errors_are_one_line_and_exit_1(shared_cluster: LocalCluster) -> None:
    done = admin(shared_cluster.nameserver, "status", "no-such-topic")
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        'error: topic "no-such-topic" does not exist: No topic route info in name server for the topic: no-such-topic'
    ]


def test_cluster_up_serves_until_ctrl_c_and_stops_cleanly(tmp_path: object) -> None:
    proc = subprocess.Popen(
        [*CLI, "cluster", "up", "--brokers", "2", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if line.startswith("cluster ready on "):
            break
    nameserver = lines[-1].split()[-1]
    with Producer(nameserver) as producer:
        assert producer.send(Message("auto-created", b"hello")).queue_offset == 0
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0
    assert "stopped cleanly" in out


def test_cluster_up_with_a_bad_setting_prints_one_line(tmp_path: Path) -> None:
    def up(*args: str) -> str:
        done = subprocess.run(
            [*CLI, "cluster", "up", "--brokers", "1", *args], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
        return done.stderr.strip().splitlines()[-1]  # gRPC's own log lines may come first

    assert up("--port", "70000") == "error: nameserver config: listen_port 70000 is not a port number (0-65535)"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert (
            up("--port", str(port))
            == f"error: nameserver cannot listen on 127.0.0.1:{port}: address in use or not available"
        )
    (tmp_path / "file").write_text("")
    assert up("--port", "0", "--data-dir", str(tmp_path / "file" / "store")).startswith(
        "error: [Errno 20] Not a directory"
    )
