"""Servers started with ROCKETSPARK_LOG_FORMAT=json log one JSON object per line."""

from __future__ import annotations

import json

import pytest

from rocketspark import LocalCluster

pytestmark = pytest.mark.integration


def test_json_logs_from_real_server_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROCKETSPARK_LOG_FORMAT", "json")  # what `rocketspark cluster up --log-format json` sets
    with LocalCluster(brokers=1, processes=True, console=False) as cluster:
        url = cluster.metrics_urls["broker-a"]
        cluster.stop_broker("broker-a")
        lines = (cluster.data_dir / "broker-a.log").read_text().splitlines()
    # every log line parses (gRPC's C core may write a line of its own to stderr: not ours)
    events = [json.loads(line) for line in lines if line.startswith("{")]
    assert len(events) >= 3 and all(line.startswith("{") or "grpc" in line.lower() for line in lines if line.strip())
    messages = [e["msg"] for e in events]
    assert f"broker broker-a: metrics on {url}" in messages
    assert "broker broker-a stopped cleanly" in messages
    assert all({"ts", "level", "logger", "msg", "pid"} <= set(e) for e in events)
