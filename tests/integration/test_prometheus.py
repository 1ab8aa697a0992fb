"""The Grafana dashboard and the Prometheus alert rules the package ships (issue 30), checked
by Prometheus itself: ``promtool check rules`` and ``promtool test rules`` (every alert fires on
the series that make it true, after its shipped ``for:``, and not on its near misses), then a
real Prometheus scraping a real cluster under traffic, where every panel's query returns data
and an alert fires once its condition is made true.

Prometheus is Debian's ``prometheus`` package (it ships ``promtool``), installed here when
missing as ``make test`` installs it; each test starts its own on a free port with its own data
directory, and stops it by its PID.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rocketspark import Admin, GroupConsumer, LocalCluster, Message, Producer
from rocketspark.errors import RocketSparkError
from rocketspark.metrics import ALERT_RULES, GRAFANA_DASHBOARD
from rocketspark.ports import free_port
from tests.helpers import eventually
from tests.integration.test_cli import admin

pytestmark = pytest.mark.integration

RULE_TESTS = Path(__file__).parent / "prometheus" / "alerts-test.yml"
RATE_INTERVAL = "10s"  # Grafana's $__rate_interval: ten 1s scrapes
ALL = ".*"  # every template variable at "All" (the dashboard's allValue)
TOPIC, GROUP = "orders", "billing"


def binary(name: str) -> str:
    """Debian's ``prometheus``/``promtool``, installed when missing (root, apt), as ``make test`` does."""
    if shutil.which(name) is None and os.geteuid() == 0 and shutil.which("apt-get"):
        env = os.environ | {"DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update", "-qq"], check=True, timeout=600, env=env)
        subprocess.run(["apt-get", "install", "-y", "-qq", "prometheus"], check=True, timeout=900, env=env)
    found = shutil.which(name)
    assert found, f"{name} not found: install Debian's prometheus package (apt-get install prometheus)"
    return found


def test_promtool_checks_and_unit_tests_the_shipped_rules(tmp_path: Path) -> None:
    rules = Path(str(ALERT_RULES))
    checked = subprocess.run([binary("promtool"), "check", "rules", str(rules)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS: 5 rules found" in checked.stdout
    shutil.copy(rules, tmp_path / rules.name)  # the unit tests name the rules file next to them
    shutil.copy(RULE_TESTS, tmp_path / RULE_TESTS.name)
    tested = subprocess.run(
        [binary("promtool"), "test", "rules", RULE_TESTS.name], cwd=tmp_path, capture_output=True, text=True
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr
    alerts = set(re.findall(r"- alert: (\w+)", rules.read_text()))
    tested_alerts = set(re.findall(r"alertname: (\w+)", RULE_TESTS.read_text()))
    assert (
        alerts
        == tested_alerts
        == {
            "RocketSparkDiskNearlyFull",
            "RocketSparkReplicaOutOfSyncStateSet",
            "RocketSparkConsumerLagGrowing",
            "RocketSparkBrokerRefusingWrites",
            "RocketSparkNoMaster",
        }
    )


class Prometheus:
    """A Prometheus of the test's own: 127.0.0.1 on a free port, a temp data directory, 1s
    scrapes and rule evaluations."""

    def __init__(self, directory: Path, targets: list[str], rules: Path) -> None:
        self.url = f"http://127.0.0.1:{free_port()}"
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s", "scrape_timeout": "1s"},
            "rule_files": [str(rules)],
            "scrape_configs": [{"job_name": "rocketspark", "static_configs": [{"targets": targets}]}],
        }
        (directory / "prometheus.yml").write_text(json.dumps(config))  # JSON is YAML
        self.log = directory / "prometheus.log"
        args = [
            binary("prometheus"),
            f"--config.file={directory / 'prometheus.yml'}",
            f"--storage.tsdb.path={directory / 'tsdb'}",
            f"--web.listen-address={self.url.removeprefix('http://')}",
            "--log.level=warn",
        ]
        with self.log.open("w") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        eventually(self._ready, timeout_s=30, interval_s=0.2)

    def _ready(self) -> bool:
        assert self.proc.poll() is None, f"prometheus exited: {self.log.read_text()[-2000:]}"
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as response:
                return bool(response.status == 200)
        except OSError:
            return False

    def api(self, path: str, **params: str) -> Any:
        query = urllib.parse.urlencode(params)
        with urllib.request.urlopen(f"{self.url}/api/v1/{path}?{query}", timeout=10) as response:
            answer = json.load(response)
        assert answer["status"] == "success", answer
        return answer["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        return list(self.api("query", query=expr)["result"])

    def stop(self) -> None:
        self.proc.terminate()  # by its PID
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=15)


def substituted(expr: str) -> str:
    """A panel's query as Grafana sends it with every variable at All."""
    known = {"__rate_interval": RATE_INTERVAL, "cluster": ALL, "broker": ALL, "topic": ALL, "group": ALL}

    def value(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        assert name in known, f"the dashboard uses a variable the test does not know: ${name}"
        return known[name]

    return re.sub(r"\$\{(\w+)\}|\$(\w+)", value, expr)


def panel_queries(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    """(panel title, query) of every target of every panel, rows' panels included."""
    panels = [p for top in dashboard["panels"] for p in [top, *top.get("panels", [])]]
    return [(p["title"], t["expr"]) for p in panels if p["type"] != "row" for t in p["targets"]]


def has_value(result: list[dict[str, Any]]) -> bool:
    return any(math.isfinite(float(sample["value"][1])) for sample in result)


@pytest.fixture
def traffic_cluster() -> Iterator[LocalCluster]:
    """A replica group of two (a controller elects the master) with a producer sending to two
    of four queues and a group consuming all four: the idle two hold its long polls."""
    with LocalCluster(brokers=1, replicas=2, processes=True) as cluster:
        with Admin(cluster.nameserver) as admin_client:
            admin_client.create_topic(TOPIC, 4)
        stop = threading.Event()

        def produce() -> None:
            with Producer(cluster.nameserver) as producer:
                n = 0
                while not stop.is_set():
                    try:
                        producer.send(Message(TOPIC, b"x" * 200, queue_id=n % 2))
                    except RocketSparkError:  # refused while the test wipes the write permission
                        pass
                    n += 1
                    time.sleep(0.05)

        thread = threading.Thread(target=produce, daemon=True)
        thread.start()
        consumer = GroupConsumer(cluster.nameserver, GROUP, TOPIC, lambda _: None, start_from="earliest").start()
        try:
            yield cluster
        finally:
            consumer.stop()
            stop.set()
            thread.join(timeout=30)


def test_every_panel_has_data_and_an_alert_fires_on_a_real_cluster(
    traffic_cluster: LocalCluster, tmp_path: Path
) -> None:
    cluster = traffic_cluster
    # The shipped for: durations (1m-10m) are kept in the package; the copy Prometheus evaluates
    # here has them at 2s, so that an alert goes pending then firing within the test's time.
    rules = tmp_path / "rules.yml"
    rules.write_text(re.sub(r"for: \d+[smh]", "for: 2s", Path(str(ALERT_RULES)).read_text()))
    targets = [urllib.parse.urlsplit(url).netloc for url in cluster.metrics_urls.values()]
    assert len(targets) == 3  # the nameserver and the two replicas
    prometheus = Prometheus(tmp_path, targets, rules)
    try:
        eventually(lambda: len(prometheus.query("up == 1")) == 3, timeout_s=30, interval_s=0.5)
        _every_panel_has_data(prometheus)
        _the_refusing_writes_alert_fires(prometheus, cluster)
    finally:
        prometheus.stop()


def _every_panel_has_data(prometheus: Prometheus) -> None:
    dashboard = json.loads(Path(str(GRAFANA_DASHBOARD)).read_text())
    queries = panel_queries(dashboard)
    assert len(queries) >= 25
    missing = set(queries)
    deadline = time.monotonic() + 90
    while missing and time.monotonic() < deadline:  # rates and quantiles need a few scrapes
        missing = {(title, expr) for title, expr in missing if not has_value(prometheus.query(substituted(expr)))}
        time.sleep(1)
    assert not missing, "panels whose query returned no data:\n" + "\n".join(
        f"{title}: {substituted(expr)}" for title, expr in sorted(missing)
    )
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":  # label_values(<selector>, <label>): what Grafana lists
            parsed = re.fullmatch(r"label_values\((.*), (\w+)\)", variable["query"]["query"])
            assert parsed, f"variable {variable['name']}: not a label_values query"
            selector, label = parsed.groups()
            values = prometheus.api(f"label/{label}/values", **{"match[]": substituted(selector)})
            assert values, f"variable {variable['name']} lists nothing"


def _the_refusing_writes_alert_fires(prometheus: Prometheus, cluster: LocalCluster) -> None:
    [refusing_panel] = [
        q
        for title, q in panel_queries(json.loads(Path(str(GRAFANA_DASHBOARD)).read_text()))
        if title == "Brokers refusing writes"
    ]
    assert _firing(prometheus) == []
    assert float(prometheus.query(substituted(refusing_panel))[0]["value"][1]) == 0
    wiped = admin(cluster.nameserver, "wipe-write-perm", "broker-a")
    assert wiped.returncode == 0, wiped.stderr
    [alert] = eventually(lambda: _firing(prometheus), timeout_s=60, interval_s=0.5)
    assert alert["labels"]["node_id"] == "broker-a"
    assert alert["labels"]["reason"] == "write permission wiped"
    assert alert["annotations"]["summary"].startswith("Broker broker-a (127.0.0.1:")
    assert float(prometheus.query(substituted(refusing_panel))[0]["value"][1]) == 1
    added = admin(cluster.nameserver, "add-write-perm", "broker-a")
    assert added.returncode == 0, added.stderr
    eventually(lambda: _firing(prometheus) == [], timeout_s=60, interval_s=0.5)


def _firing(prometheus: Prometheus) -> list[dict[str, Any]]:
    alerts = prometheus.api("alerts")["alerts"]
    return [
        a for a in alerts if a["labels"]["alertname"] == "RocketSparkBrokerRefusingWrites" and a["state"] == "firing"
    ]
