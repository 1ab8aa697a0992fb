"""LocalCluster's plumbing: waiting for a child's readiness, and config checked in-process too."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from rocketspark.cluster import LocalCluster, ServerProcess
from rocketspark.errors import ClusterError, ConfigError


def test_a_child_that_hangs_before_its_readiness_line_times_out(tmp_path: Path) -> None:
    proc = ServerProcess(
        "hung", [sys.executable, "-c", "import time; time.sleep(60)"], tmp_path / "hung.log", ready_timeout_s=0.5
    )
    started = time.monotonic()
    with pytest.raises(ClusterError, match=r"hung did not print its readiness line within 0\.5 s"):
        proc.start()
    assert time.monotonic() - started < 30  # not the child's 60 s: the wait has its own deadline
    assert not proc.alive()


def test_a_child_that_exits_early_says_so(tmp_path: Path) -> None:
    script = "import sys; print('bad config', file=sys.stderr); sys.exit(3)"
    proc = ServerProcess("broken", [sys.executable, "-c", script], tmp_path / "broken.log")
    with pytest.raises(ClusterError, match=r"broken exited with status 3 before it was ready(.|\n)*bad config"):
        proc.start()


def test_a_child_that_prints_its_readiness_line_is_started(tmp_path: Path) -> None:
    script = "import time; print('x ready on 127.0.0.1:1', flush=True); time.sleep(60)"
    proc = ServerProcess("ok", [sys.executable, "-c", script], tmp_path / "ok.log")
    try:
        assert proc.start() == "127.0.0.1:1" and proc.alive()
    finally:
        proc.kill()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"nameserver_config": {"scan_interval_ms": "5"}}, "nameserver config: scan_interval_ms must be int"),
        ({"broker_config": {"flush_modes": "sync"}}, r"broker broker-a config: unknown key\(s\) flush_modes"),
    ],
)
def test_in_process_servers_check_their_config_like_a_config_file(
    kwargs: dict[str, dict[str, object]], message: str, tmp_path: Path
) -> None:
    with pytest.raises(ConfigError, match=message):
        LocalCluster(brokers=1, data_dir=tmp_path, **kwargs).start()  # type: ignore[arg-type]
