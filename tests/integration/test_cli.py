"""The ``rocketspark`` command: the sidecar and the admin tables, as a user runs them."""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from rocketspark import Admin, Consumer, LocalCluster, Message, Producer
from rocketspark.cluster import ServerProcess
from rocketspark.errors import TopicNotExistError
from tests.docblocks import blocks_run_by

pytestmark = pytest.mark.integration
CLI = [sys.executable, "-m", "rocketspark.cli"]
ROOT = Path(__file__).resolve().parents[2]
CONSOLE_SCRIPT = Path(sys.executable).parent / "rocketspark"


def rocketspark() -> list[str]:
    """The docs run the installed console script; without one (a source checkout, or while
    the project is being reinstalled), the module it runs."""
    return [str(CONSOLE_SCRIPT)] if CONSOLE_SCRIPT.exists() else CLI


def cluster_up(*args: str) -> tuple[subprocess.Popen[str], list[str]]:
    """``rocketspark cluster up ARGS`` in the foreground, as the docs run it: the process, and
    what it printed up to its "cluster ready" line (the caller stops it)."""
    proc = subprocess.Popen(
        [*rocketspark(), "cluster", "up", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=source_env(COLUMNS="200"),
    )
    assert proc.stdout is not None
    lines: list[str] = []
    try:
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("cluster ready on "):
                break
    except BaseException:
        proc.kill()
        raise
    return proc, lines


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
    again = admin(ns, "delete-topic", topic_name)  # it exists nowhere now: said so, exit 1
    assert again.returncode == 1
    assert f'topic "{topic_name}" exists on no broker and no nameserver: nothing was deleted' in again.stderr


def test_admin_json_prints_one_document_a_script_can_read(shared_cluster: LocalCluster, topic_name: str) -> None:
    ns = shared_cluster.nameserver
    created = admin(ns, "--json", "create-topic", topic_name, "--queues", "2")
    assert json.loads(created.stdout)["messages"] == [f'topic "{topic_name}" with 2 queues on: broker-a, broker-b']
    status = admin(ns, "status", topic_name, "--json")  # the flag may follow the command
    [queues] = json.loads(status.stdout)["tables"]
    assert [row["queue #"] for row in queues["rows"]] == [0, 1, 2, 3] and queues["columns"][0] == "queue #"
    progress = admin(ns, "progress", "nobody", topic_name, "--json")  # a group that committed nothing: exit 3
    assert progress.returncode == 3 and "has committed no offset" in json.loads(progress.stdout)["error"]
    failed = admin(ns, "--json", "status", "no-such-topic")
    assert failed.returncode == 1 and 'topic "no-such-topic" does not exist' in json.loads(failed.stdout)["error"]
    admin(ns, "delete-topic", topic_name)


def test_admin_errors_are_one_line_and_exit_1(shared_cluster: LocalCluster) -> None:
    done = admin(shared_cluster.nameserver, "status", "no-such-topic")
    assert done.returncode == 1
    missing = f"the nameserver at {shared_cluster.nameserver} knows no such topic"
    assert done.stderr.strip().splitlines() == [f'error: topic "no-such-topic" does not exist: {missing}']


def test_cluster_up_serves_until_ctrl_c_and_stops_cleanly(tmp_path: Path) -> None:
    [line] = docs_lines(".venv/bin/rocketspark cluster up ", "test_cluster_up_serves_until_ctrl_c_and_stops_cleanly")
    assert line == "--brokers 2 --port 9876 --data-dir data"  # run below with a free port and a temporary dir
    data = tmp_path / "data"
    proc, lines = cluster_up("--brokers", "2", "--port", "0", "--data-dir", str(data))
    nameserver = lines[-1].split()[-1]
    with Producer(nameserver) as producer:
        assert producer.send(Message("auto-created", b"hello")).queue_offset == 0
    [console] = [line.split()[-1] for line in lines if line.startswith("console ready on ")]
    with urllib.request.urlopen(console + "api/topics", timeout=10) as answer:  # the sidecar serves the console
        assert "auto-created" in {t["name"] for t in json.loads(answer.read())}
    secrets_file = data / "console.env"
    assert secrets_file.stat().st_mode & 0o777 == 0o600 and "ROCKETSPARK_CONSOLE_SECRET=" in secrets_file.read_text()
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0
    assert "stopped cleanly" in out
    assert {"broker-a", "broker-b"} <= {p.name for p in data.iterdir()}  # the stores stay in --data-dir


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


def docs_lines(prefix: str, test: str) -> list[str]:
    """The shell lines starting with ``prefix`` (the rest of each, comment removed) of the docs
    blocks marked ``<!-- run by tests/integration/test_cli.py::<test> -->``: the blocks this
    file runs itself, which the docs' own runner (tests/docrun.py) therefore skips."""
    blocks = blocks_run_by(f"tests/integration/test_cli.py::{test}")
    lines = [line for block in blocks for line in block.text.splitlines()]
    return [line.removeprefix(prefix).split("#", 1)[0].strip() for line in lines if line.startswith(prefix)]


def source_env(**extra: str) -> dict[str, str]:
    """The environment of a command run by a user, importing the source tree under test (the
    console script would otherwise import the installed copy, which may be older)."""
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{path}" if path else str(ROOT), **extra}


def flat(stdout: str) -> str:
    """The output with its line breaks and runs of spaces as single spaces (titles wrap)."""
    return " ".join(stdout.split())


def table_rows(stdout: str) -> list[list[str]]:
    return [[cell.strip() for cell in line.split("│")[1:-1]] for line in stdout.splitlines() if line.startswith("│")]


def test_every_admin_command_of_the_docs_runs_as_written(make_cluster: Callable[..., LocalCluster]) -> None:
    cluster = make_cluster(brokers=2)
    ns = cluster.nameserver
    env = source_env(ROCKETSPARK_NAMESRV=ns, COLUMNS="200")  # as the docs: exported, no -n

    def run(line: str) -> str:
        done = subprocess.run(
            [*rocketspark(), "admin", *shlex.split(line)], capture_output=True, text=True, timeout=60, env=env
        )
        assert done.returncode == 0, f"rocketspark admin {line}: {done.stderr}"
        return done.stdout

    documented = docs_lines(".venv/bin/rocketspark admin ", "test_every_admin_command_of_the_docs_runs_as_written")
    assert "counters [--broker broker-a]" in documented  # one line, two forms
    documented = [
        form for line in documented for form in (["counters", "counters --broker broker-a"] if "[" in line else [line])
    ]

    def topics(out: str) -> None:
        rows = table_rows(out)
        assert ["orders", "normal", "16", "broker-a, broker-b"] in rows
        assert ["events", "static", "8", "broker-a, broker-b"] in rows

    def status_json(out: str) -> None:
        [shown] = json.loads(out)["tables"]
        assert shown["title"] == "status of orders" and len(shown["rows"]) == 16  # 8 queues on each broker

    def clusters(out: str) -> None:
        assert "DefaultCluster" in out and cluster.brokers["broker-a"] in out and cluster.brokers["broker-b"] in out

    def create_topic(out: str) -> None:
        assert 'topic "orders" with 8 queues on: broker-a, broker-b' in flat(out)
        assert [(q.broker_name, q.write_queue_nums) for q in api.topic_route("orders").queues] == [
            ("broker-a", 8),
            ("broker-b", 8),
        ]
        # the other two forms the docs' comment names
        assert "on: broker-a\n" in run("create-topic solo --queues 2 --brokers broker-a")
        assert [q.broker_name for q in api.topic_route("solo").queues] == ["broker-a"]
        assert "on: broker-a, broker-b" in run("create-topic clustered --queues 2 --cluster DefaultCluster")

    def route(out: str) -> None:
        assert [row[:5] for row in table_rows(out)] == [
            ["broker-a", cluster.brokers["broker-a"], "8", "8", "RW-"],
            ["broker-b", cluster.brokers["broker-b"], "8", "8", "RW-"],
        ]

    def status(out: str) -> None:
        assert [row[0] for row in table_rows(out)] == [str(q) for q in range(16)]

    def create_static_topic(out: str) -> None:
        assert "static topic events (epoch" in flat(out) and len(table_rows(out)) == 8
        leaders = [q.segments[-1].broker_name for q in api.topic_status("events")]
        assert sorted(leaders) == ["broker-a"] * 4 + ["broker-b"] * 4

    def remap_queues(out: str) -> None:
        assert ["0", "broker-a", "broker-b", "10000"] in table_rows(out)  # queue 1 was on broker-b already
        status = api.topic_status("events")
        assert [(s.broker_name, s.state.value) for s in status[0].segments] == [
            ("broker-a", "Expired"),  # sealed with nothing in it
            ("broker-b", "Normal"),
        ]
        assert status[1].segments[-1].broker_name == "broker-b"

    def remap_total(out: str) -> None:
        assert "remap of events: 12 logical queues" in flat(out)
        assert [q.queue_id for q in api.topic_status("events")] == list(range(12))

    def drain(out: str) -> None:
        assert "broker broker-b leads no logical queue now; its write permission is wiped" in flat(out)
        assert {q.segments[-1].broker_name for q in api.topic_status("events")} == {"broker-a"}
        assert api.broker_runtime("broker-b")["perm"] == "R--"

    def progress(out: str) -> None:
        assert table_rows(out)[0] == ["0", "broker-a", "5", "2", "3"]
        assert "total lag: 5" in flat(out)  # 3 on queue 0, 2 on queue 1 (never committed)

    def wipe(out: str) -> None:
        assert "broker broker-b: write permission wiped" in flat(out)
        assert api.broker_runtime("broker-b")["perm"] == "R--"
        assert "broker broker-b: write permission added" in run("add-write-perm broker-b")  # what undoes it
        assert api.broker_runtime("broker-b")["perm"] == "RW-"

    def nameserver_counters(out: str) -> None:
        assert "requests served by the nameserver" in flat(out) and "GET_ROUTEINFO_BY_TOPIC" in out
        assert "notificationsSent" in out

    def broker_counters(out: str) -> None:
        assert "requests served by broker-a" in flat(out)
        rows = table_rows(out)
        assert ["320", "SEND_BATCH_MESSAGE", "2"] in rows  # the two queues' batches sent before `progress`
        assert ["messagesStored", "7"] in rows

    def send(out: str) -> None:
        [row] = table_rows(out)
        assert row[4] == "SEND_OK" and len(row[0]) == 32  # msg id, queue, broker, offset, status
        assert row[2] == ("broker-a" if int(row[1]) < 8 else "broker-b")  # the topic's queues 0-15, as Spark's
        sent_ids.append(row[0])
        sent_queues.append(row[1:4])

    def consume(out: str) -> None:
        rows = table_rows(out)
        assert len(rows) == 5 and {row[1] for row in rows} == {"orders"}

    def query_msg(out: str) -> None:
        deadline = time.monotonic() + 10
        while not table_rows(out) and time.monotonic() < deadline:  # indexed once flushed (every 500 ms)
            time.sleep(0.3)
            out = run("query-msg orders --key k1")
        [row] = table_rows(out)
        assert row[0] == sent_ids[0] and row[6] == "k1" and row[8] == "hello"
        assert row[2:5] == sent_queues[0] and row[7].endswith(" UTC")  # queue #, broker, offset as sent
        by_id = table_rows(run(f"query-msg --id {sent_ids[0]}"))  # the docs' other form
        assert [r[:2] for r in by_id] == [[sent_ids[0], "orders"]]

    def print_msg(out: str) -> None:
        rows = table_rows(out)
        assert len(rows) == 5 and rows[0][0] == sent_ids[0] and rows[0][8] == "hello"  # the newest first
        assert rows[0][2:5] == sent_queues[0]
        cursor = flat(out).split("--cursor ")[1].split()[0]
        rest = table_rows(run(f"print-msg orders --cursor {cursor}"))  # the next page: the other 3
        assert sorted(r[8] for r in rows[1:] + rest) == ["x"] * 5 + ["y"] * 2

    def groups(out: str) -> None:
        assert ["my-group", "orders", "0", "-", "6"] in table_rows(out)  # 5 + 2 - 2 committed + the one sent

    def reset_offset(out: str) -> None:
        assert [row[:2] for row in table_rows(out)] == [
            [str(q), "broker-a" if q < 8 else "broker-b"] for q in range(16)
        ]
        assert "reset to the earliest message still stored" in flat(out)
        assert "move there at their next heartbeat" in flat(out)
        assert api.committed_offset("my-group", "orders", 0) == 0

    def delete_topic(out: str) -> None:
        assert 'topic "orders" deleted from broker-a, broker-b and every nameserver' in flat(out)
        with pytest.raises(TopicNotExistError):
            api.topic_route("orders")

    sent_ids: list[str] = []
    sent_queues: list[list[str]] = []

    def before_progress() -> None:
        with Producer(ns) as producer, Consumer(ns) as consumer:
            producer.send_batch([Message("orders", b"x", queue_id=0)] * 5 + [Message("orders", b"y", queue_id=1)] * 2)
            consumer.commit_offset("my-group", "orders", 0, 2)

    checks: dict[str, Callable[[str], None]] = {
        "clusters": clusters,
        "create-topic orders --queues 8": create_topic,
        "route orders": route,
        "status orders": status,
        "status orders --json": status_json,
        "create-static-topic events --queues 8": create_static_topic,
        "topics": topics,
        "remap events --queues 0,1 --to-broker broker-b": remap_queues,
        "remap events --total-queues 12": remap_total,
        "drain-broker broker-b": drain,
        "progress my-group orders": progress,
        "wipe-write-perm broker-b": wipe,
        "counters": nameserver_counters,
        "counters --broker broker-a": broker_counters,
        "send orders hello --keys k1": send,
        "consume orders --count 5": consume,
        "query-msg orders --key k1": query_msg,
        "print-msg orders --limit 5": print_msg,
        "groups": groups,
        "reset-offset my-group orders --earliest": reset_offset,
        "delete-topic orders": delete_topic,
    }
    assert documented == list(checks)  # the docs' commands, in their order: a new one needs a check here
    with Admin(ns) as api:  # what the checks above look at
        for line, check in checks.items():
            if line.startswith("progress"):
                before_progress()
            check(run(line))


def test_the_servers_start_from_the_shipped_config_files(tmp_path: Path) -> None:
    """``python -m nameserver --conf conf/nameserver.toml`` and ``python -m broker --conf
    conf/broker-X.toml``, as the docs run them, with ``--port 0`` (and the broker's
    nameserver and data directory) given on the command line."""
    commands = docs_lines(".venv/bin/python -m ", "test_the_servers_start_from_the_shipped_config_files")
    assert commands == [
        "nameserver --conf conf/nameserver.toml",
        "broker --conf conf/broker-a.toml",
        "broker --conf conf/broker-b.toml",
    ]
    env = source_env()
    started: list[ServerProcess] = []

    def split(line: str) -> tuple[str, list[str]]:  # the docs' paths are relative to the project
        module, *args = shlex.split(line)
        return module, [str(ROOT / a) if a.endswith(".toml") else a for a in args]

    try:
        first, *brokers = commands
        module, args = split(first)
        ns_proc = ServerProcess(module, [sys.executable, "-m", module, *args, "--port", "0"], tmp_path / "ns.log")
        started.append(ns_proc)
        ns = ns_proc.start(env)
        for line in brokers:
            module, args = split(line)
            name = Path(args[-1]).stem
            extra = ["--port", "0", "-n", ns, "--data-dir", str(tmp_path / name)]
            proc = ServerProcess(name, [sys.executable, "-m", module, *args, *extra], tmp_path / f"{name}.log")
            started.append(proc)
            proc.start(env)
        with Admin(ns) as admin:
            assert sorted(admin.cluster_list()["brokers"]) == ["broker-a", "broker-b"]
            assert admin.create_topic("from-conf", queues=1) == ["broker-a", "broker-b"]
    finally:
        for proc in reversed(started):
            proc.stop()


SECURITY_WALKTHROUGH = "test_the_docs_security_walkthrough_runs_as_written"


def test_the_docs_security_walkthrough_runs_as_written(tmp_path: Path) -> None:
    [line] = docs_lines(".venv/bin/rocketspark cluster up ", SECURITY_WALKTHROUGH)
    assert line == "--brokers 2 --port 9876 --data-dir data --auth --tls"  # run with a free port and a temporary dir
    data = tmp_path / "data"
    words = ["0" if w == "9876" else str(data) if w == "data" else w for w in line.split()]
    proc, said = cluster_up(*words)
    try:
        assert f"TLS on: development CA {data}/tls/ca.pem" in "".join(said)
        assert f"source {data}/client.env" in "".join(said)
        trusted = ssl.create_default_context(cafile=str(data / "tls" / "ca.pem"))
        [console] = [line.split()[-1] for line in said if line.startswith("console ready on ")]
        assert console.startswith("https://")  # the admin's secret never crosses in the clear
        with urllib.request.urlopen(console + "api/session", timeout=10, context=trusted) as answer:
            assert json.loads(answer.read())["admin"] is False
        token_file = data / "metrics.token"  # what Prometheus sends, in a file only this user reads
        assert token_file.stat().st_mode & 0o077 == 0 and str(token_file) in "".join(said)
        token = token_file.read_text()
        assert token not in "".join(said)
        [metrics_line] = [line for line in said if line.startswith("metrics for Prometheus: ")]
        metrics = metrics_line.split()[3:]
        assert len(metrics) == 3 and all(url.startswith("https://") for url in metrics)  # a nameserver, 2 brokers
        for url in metrics:
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(url, timeout=10, context=trusted)
            assert refused.value.code == 401
            scrape = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
            with urllib.request.urlopen(scrape, timeout=10, context=trusted) as answer:
                assert b"rocketmq_rpc_latency" in answer.read()
        env_file = data / "client.env"
        assert env_file.stat().st_mode & 0o077 == 0
        exported = dict(
            shlex.split(x.removeprefix("export "))[0].split("=", 1) for x in env_file.read_text().splitlines()
        )
        assert exported["ROCKETSPARK_SECRET_KEY"] not in "".join(said)  # written to the file, never printed
        env = source_env(COLUMNS="200", **exported)

        def run(command: str, **extra: str) -> subprocess.CompletedProcess[str]:
            args = [*rocketspark(), "admin", *shlex.split(command)]
            return subprocess.run(args, capture_output=True, text=True, timeout=60, env={**env, **extra})

        outputs = {}
        for command in docs_lines(".venv/bin/rocketspark admin ", SECURITY_WALKTHROUGH):
            done = run(command)
            assert done.returncode == 0, f"rocketspark admin {command}: {done.stderr}"
            outputs[command.split()[0] + " " + command.split()[1]] = done.stdout
        created = outputs["user create"]
        secret = created.split('secret key of "etl" (shown once; store it now): ')[1].split()[0]
        assert "Allow Pub,Sub on Topic:orders; Allow Sub on Group:etl-*" in outputs["user list"]
        assert secret not in outputs["user list"]
        tls = {"tls": True, "tls_ca_file": exported["ROCKETSPARK_TLS_CA_FILE"]}
        with Producer(exported["ROCKETSPARK_NAMESRV"], access_key="etl", secret_key=secret, **tls) as producer:
            assert producer.send(Message("orders", b"as etl", queue_id=0)).queue_offset == 0

        as_etl = run("--access-key etl user list", ROCKETSPARK_SECRET_KEY=secret)
        assert as_etl.returncode == 1
        assert as_etl.stderr.strip().splitlines()[-1] == (
            'error: user "etl" is not a super user: only super users read or change users and policies'
        )
        no_secret = run("--access-key etl user list", ROCKETSPARK_SECRET_KEY="")
        assert no_secret.stderr.strip().splitlines()[-1] == (
            "error: --access-key etl: set its secret in ROCKETSPARK_SECRET_KEY (never on the command line)"
        )
        plaintext = run("user list", ROCKETSPARK_TLS="false", ROCKETSPARK_TLS_CA_FILE="")
        assert "as a TLS server does with a plaintext client" in plaintext.stderr
        assert run("user delete etl").returncode == 0
        assert "etl" not in run("user list").stdout
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
