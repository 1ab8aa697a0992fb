"""Shared fixtures: real clusters (nameserver + brokers as child processes) that always stop."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from rocketspark import compiled
from rocketspark.cluster import LocalCluster

_topic_ids = itertools.count()
# A 2-core CI box running Spark and several servers is "busy" by any load-average measure; the
# nameserver would rightly pause its pushes. Tests of the push itself must not depend on the
# box, so clusters here push regardless; test_route_push covers the pause on its own.
PUSH_ALWAYS = {"notify_max_load_per_cpu": 1_000.0}


def pytest_sessionstart(session: pytest.Session) -> None:
    """A compiled checkout older than its source would test the old code (rocketspark.compiled)."""
    why = compiled.refusal()
    if why is not None:
        pytest.exit(why, returncode=2)


@pytest.fixture(autouse=True)
def _no_ambient_nameserver(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests name their nameserver explicitly; an exported ROCKETSPARK_NAMESRV must not leak in."""
    monkeypatch.delenv("ROCKETSPARK_NAMESRV", raising=False)


@pytest.fixture
def make_cluster() -> Iterator[Callable[..., LocalCluster]]:
    """Start clusters of real ``python -m nameserver`` / ``python -m broker`` processes."""
    started: list[LocalCluster] = []

    def make(brokers: int = 1, **kwargs: Any) -> LocalCluster:
        kwargs.setdefault("processes", True)
        kwargs["nameserver_config"] = {**PUSH_ALWAYS, **kwargs.get("nameserver_config", {})}
        cluster = LocalCluster(brokers=brokers, **kwargs).start()
        started.append(cluster)
        return cluster

    yield make
    for cluster in started:
        cluster.stop()


@pytest.fixture(scope="module")
def shared_cluster() -> Iterator[LocalCluster]:
    """One two-broker process cluster per test module; tests use distinct topics."""
    cluster = LocalCluster(
        brokers=2,
        processes=True,
        broker_config={"auto_create_topic_enable": False},
        nameserver_config=PUSH_ALWAYS,
    ).start()
    yield cluster
    cluster.stop()


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> str:
    base = "".join(c if c.isalnum() else "-" for c in request.node.name)[:60]
    return f"{base}-{next(_topic_ids)}"
