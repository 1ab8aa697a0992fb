"""Metrics an operator uses as they are (issue 30): fixed metrics ports from ``cluster up
--metrics-port`` named everywhere (start-up table, ``admin clusters``, the console), label
values by name as RocketMQ 5 writes them, ``message_type`` on messages in, and long-poll holds
kept out of ``rocketmq_rpc_latency``; all on real servers, scraped over HTTP."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from rocketspark import Admin, Consumer, LocalCluster, Message, Producer
from rocketspark.ports import free_port
from rocketspark.rocketmq4 import records
from rocketspark.rocketmq4.codes import Code
from tests import rocketmq4
from tests.docblocks import blocks_run_by
from tests.helpers import eventually
from tests.integration.test_cli import CLI, cluster_up
from tests.integration.test_metrics import scrape, value

pytestmark = pytest.mark.integration

TEST = "test_cluster_up_metrics_port_names_every_url"


def free_run(count: int) -> int:
    """A base port with ``count`` free ports from it on."""
    for _ in range(50):
        base = free_port()
        try:
            for port in range(base, base + count):
                with socket.socket() as probe:
                    probe.bind(("127.0.0.1", port))
        except OSError:
            continue
        return base
    raise AssertionError(f"no run of {count} free ports found")


def test_cluster_up_metrics_port_names_every_url(tmp_path: Path) -> None:
    [block] = blocks_run_by(f"tests/integration/test_metrics_names.py::{TEST}")  # docs/operations/metrics.md
    assert (
        block.text.strip()
        == ".venv/bin/rocketspark cluster up --brokers 2 --port 9876 --metrics-port 5556 --data-dir data"
    )  # run with free ports below
    base = free_run(3)
    args = ["--brokers", "2", "--port", "0", "--metrics-port", str(base), "--data-dir", str(tmp_path / "data")]
    proc, lines = cluster_up(*args)
    try:
        expected = [f"http://127.0.0.1:{base + i}/metrics" for i in range(3)]
        [announced] = [out for out in lines if out.startswith("metrics for Prometheus: ")]
        assert announced.split()[3:] == expected
        in_table = re.findall(r"http://127\.0\.0\.1:\d+/metrics", "".join(lines[: lines.index(announced)]))
        assert in_table == expected  # the start-up table: nameserver, broker-a, broker-b
        for url, (node_type, node_id) in zip(
            expected, [("nameserver", None), ("broker", "broker-a"), ("broker", "broker-b")], strict=True
        ):
            samples = scrape(url)
            labels = {labels["node_type"] for found in samples.values() for labels, _ in found}
            assert labels == {node_type}, url
            if node_id:
                assert {labels["node_id"] for labels, _ in samples["rocketspark_uptime_seconds"]} == {node_id}
        nameserver = lines[-1].split()[-1]
        shown = subprocess.run(
            [*CLI, "admin", "-n", nameserver, "clusters"], capture_output=True, text=True, timeout=60
        )
        assert shown.returncode == 0, shown.stderr
        for name, url in (("broker-a", expected[1]), ("broker-b", expected[2])):
            assert re.search(rf"{name} .*{re.escape(url)}", shown.stdout), shown.stdout
        assert f"{nameserver} " in shown.stdout and expected[0] in shown.stdout
        [console] = [out.split()[-1] for out in lines if out.startswith("console ready on ")]
        with urllib.request.urlopen(console + "api/overview", timeout=10) as answer:
            overview = json.loads(answer.read())
        brokers = {b["name"]: b["metricsUrl"] for c in overview["clusters"] for b in c["brokers"]}
        assert brokers == {"broker-a": expected[1], "broker-b": expected[2]}
        assert overview["nameserverMetrics"] == [{"address": nameserver, "metricsUrl": expected[0]}]
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
    assert proc.returncode == 0


def test_replicas_take_their_metrics_ports_after_the_brokers() -> None:
    base = free_run(5)
    with LocalCluster(brokers=2, replicas=2, metrics_port=base) as cluster:
        order = ["nameserver", "broker-a-r0", "broker-b-r0", "broker-a-r1", "broker-b-r1"]
        assert cluster.metrics_urls == {k: f"http://127.0.0.1:{base + i}/metrics" for i, k in enumerate(order)}
        for key in order[1:]:
            node = {labels["node_id"] for labels, _ in scrape(cluster.metrics_urls[key])["rocketspark_uptime_seconds"]}
            assert node == {key.rsplit("-", 1)[0]}


def test_request_and_response_codes_are_labelled_by_name_and_held_pulls_stay_out_of_latency() -> None:
    with LocalCluster(brokers=1) as cluster, Admin(cluster.nameserver) as admin:
        admin.create_topic("named", 1)
        url = cluster.metrics_urls["broker-a"]
        with Producer(cluster.nameserver) as producer, Consumer(cluster.nameserver) as consumer:
            producer.send(Message("named", b"x"))
            started = time.monotonic()
            held = consumer.pull("named", 0, 1, long_poll_ms=1000)  # nothing after offset 1: held a second
            assert not held.messages and time.monotonic() - started >= 0.9
        samples = scrape(url)
        codes = {
            (labels["request_code"], labels["response_code"]) for labels, _ in samples["rocketmq_rpc_latency_count"]
        }
        assert ("send_message", "success") in codes and ("pull_message", "pull_not_found") in codes
        assert not [c for c in codes if c[0].isdigit() or c[1].isdigit()], codes  # every code has a name
        pulls = value(
            samples, "rocketmq_rpc_latency_count", request_code="pull_message", response_code="pull_not_found"
        )
        fast = value(
            samples,
            "rocketmq_rpc_latency_bucket",
            request_code="pull_message",
            response_code="pull_not_found",
            le="100.0",
        )
        assert pulls == 1 and fast == 1  # the held second is not its latency
        assert value(samples, "rocketspark_pull_hold_seconds_count", request_code="pull_message") == 1
        assert 0.9 <= value(samples, "rocketspark_pull_hold_seconds_sum", request_code="pull_message") < 5
        assert (
            value(
                scrape(cluster.metrics_urls["nameserver"]),
                "rocketmq_rpc_latency_count",
                request_code="get_routeinfo_by_topic",
            )
            > 0
        )


def _send_4x(client: rocketmq4.RawClient, topic: str, body: bytes, properties: dict[str, str]) -> int:
    """A RocketMQ 4.x client's SEND_MESSAGE_V2, as Java's client sends it."""
    header = {"a": "raw", "b": topic, "c": "TBW102", "d": 4, "e": 0, "f": 0, "g": int(time.time() * 1000)}
    header |= {"h": 0, "i": records.properties_string(properties), "j": 0, "k": "false"}
    return client.call(Code.SEND_MESSAGE_V2, header, body).code


def test_message_type_tells_fifo_delay_and_priority_messages_from_normal_ones() -> None:
    with LocalCluster(brokers=1) as cluster, Admin(cluster.nameserver) as admin:
        admin.create_topic("typed", 1)
        url = cluster.metrics_urls["broker-a"]
        with Producer(cluster.nameserver) as producer:
            producer.send_batch([Message("typed", b"n" * 10, queue_id=0) for _ in range(3)])
            producer.send(Message("typed", b"fifo", properties={"__SHARDINGKEY": "order-7"}))
            producer.send(Message("typed", b"urgent", properties={"_SYS_MSG_PRIORITY_": "5"}))  # RocketMQ 5.4
            keyed = producer.send(Message("typed", b"keyed", sharding_key="order-8"))  # written as __SHARDINGKEY
            mixed = [Message("typed", b"f", properties={"__SHARDINGKEY": "o"}), Message("typed", b"n")]
            producer.send_batch([*(m for m in mixed for _ in range(20))])  # the numpy check of a larger batch
        with rocketmq4.RawClient(cluster.brokers["broker-a"]) as client:
            assert _send_4x(client, "typed", b"later", {"DELAY": "1"}) == 0  # held a second, then delivered

        def typed() -> dict[str, float] | None:
            samples = scrape(url)
            found = {
                k: value(samples, "rocketmq_messages_in_total", topic="typed", message_type=k)
                for k in ("normal", "fifo", "delay", "transaction", "priority")
            }
            return found if found["delay"] else None

        expected = {"normal": 3 + 20, "fifo": 1 + 1 + 20, "delay": 1, "transaction": 0, "priority": 1}
        assert eventually(typed, 30) == expected
        samples = scrape(url)
        assert value(samples, "rocketmq_messages_in_total", topic="typed") == 47
        assert admin.query_message_by_id(keyed.msg_id).properties["__SHARDINGKEY"] == "order-8"
        assert value(samples, "rocketmq_throughput_in_total", topic="typed", message_type="fifo") > 0
        held = [
            labels
            for labels, _ in samples["rocketmq_messages_in_total"]
            if labels["topic"].startswith("rmq_sys_wheel_timer-")
        ]
        assert {labels["message_type"] for labels in held} == {"normal"}  # its held copy: typed once, above
