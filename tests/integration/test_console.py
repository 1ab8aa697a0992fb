"""The web console (issue 13) in real headless Chromium (Debian's package), against a real
cluster: the DOM shows the brokers and a static topic's segments after a remap, the page logs
no console error, and a screenshot is saved. The JSON API is read-only until one signs in.

``ROCKETSPARK_SCREENSHOT=path`` saves the screenshot there (the README's is docs/console.png)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rocketspark import Admin, Consumer, LocalCluster, Message, Producer

pytestmark = pytest.mark.integration

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(brokers=2) as cluster, Admin(cluster.nameserver) as admin:
        admin.create_topic("orders", 4)
        admin.create_static_topic("events", 2, brokers=["broker-a"])
        with Producer(cluster.nameserver) as producer, Consumer(cluster.nameserver) as consumer:
            producer.send_batch([Message("events", b"e", queue_id=0)] * 30)
            admin.remap_static_topic("events", [0], "broker-b")
            producer.send_batch([Message("events", b"after", queue_id=0)] * 10)
            producer.send_batch([Message("orders", b"o", queue_id=1)] * 7)
            consumer.commit_offset("billing", "orders", 1, 2)
        yield cluster


def chromium(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    if CHROMIUM is None:
        pytest.fail("chromium is not installed: `make test` installs it (apt-get install chromium)")
    command = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",  # root in CI
        "--disable-gpu",
        "--enable-logging=stderr",
        "--v=0",
        "--virtual-time-budget=8000",  # the page's fetches and first refreshes run
        *args,
        url,
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def console_messages(stderr: str) -> list[str]:
    """What the page logged to its console (errors, uncaught exceptions, failed loads)."""
    return [line for line in stderr.splitlines() if ":CONSOLE" in line or "Uncaught" in line]


def test_the_console_error_check_sees_what_a_broken_page_logs() -> None:
    """The check below is only worth something if this Chromium reports a page's console: a
    page that logs an error and throws must be caught by it."""
    broken = "data:text/html,<script>console.error('probe-logged');throw new Error('probe-thrown')</script>"
    logged = " ".join(console_messages(chromium(broken, "--dump-dom").stderr))
    assert "probe-logged" in logged and "probe-thrown" in logged


def test_the_console_draws_the_cluster_and_a_remapped_static_topic(cluster: LocalCluster, tmp_path: Path) -> None:
    page = chromium(cluster.console_url, "--dump-dom")
    assert page.returncode == 0, page.stderr[-2000:]
    dom = page.stdout
    assert 'data-loaded="true"' in dom
    for name, address in cluster.brokers.items():
        assert f"<td>{name}</td><td>{address}</td>" in dom
    timeline = re.search(r'<svg[^>]*data-topic="events".*?</svg>', dom, re.S)
    assert timeline is not None, "no timeline for the static topic"
    segments = re.findall(r'<rect[^>]*class="segment"[^>]*>', timeline.group(0))
    seen = {(re.search(r'data-queue="(\d+)"', s)[1], re.search(r'data-broker="([^"]+)"', s)[1]) for s in segments}  # type: ignore[index]
    assert seen == {("0", "broker-a"), ("0", "broker-b"), ("1", "broker-a")}  # queue 0 moved: two segments
    assert '<td>billing</td><td>orders</td><td>0</td><td class="num">5</td>' in dom  # 7 - 2 committed
    assert console_messages(page.stderr) == []

    with Producer(cluster.nameserver) as producer:  # a few seconds of traffic for the throughput chart
        for i in range(30):
            producer.send_batch([Message("orders", b"o" * 100, queue_id=i % 4)] * (100 + 40 * (i % 7)))
            time.sleep(0.2)
    dom = chromium(cluster.console_url, "--dump-dom").stdout
    assert 'class="throughput"' in dom  # the chart has a line
    shot = Path(os.environ.get("ROCKETSPARK_SCREENSHOT") or tmp_path / "console.png")
    taken = chromium(cluster.console_url, f"--screenshot={shot}", "--window-size=1280,1500", "--hide-scrollbars")
    assert taken.returncode == 0, taken.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
    assert console_messages(taken.stderr) == []


def call(
    url: str, method: str = "GET", body: Any = None, cookie: str = "", console: bool = True, host: str = ""
) -> tuple[int, Any, str]:
    headers = {"Content-Type": "application/json", **({"X-Console": "1"} if console else {})}
    if host:
        headers["Host"] = host
    if cookie:
        headers["Cookie"] = cookie
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read()), response.headers.get("Set-Cookie", "")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read()), ""


def test_the_console_is_read_only_until_one_signs_in_as_admin(cluster: LocalCluster) -> None:
    api = cluster.console_url + "api/"
    status, topics, _ = call(api + "topics")
    assert (
        status == 200
        and {"name": "orders", "kind": "normal", "queues": 8, "brokers": ["broker-a", "broker-b"]} in topics
    )
    assert call(api + "topics", "POST", {"name": "new-one"})[0] == 401  # reading needs nothing; changing does
    assert call(api + "topics", "POST", {"name": "new-one"}, console=False)[0] == 403  # not from the page
    assert call(api + "topics", host="evil.example:80")[0] == 421  # DNS rebinding: a name it does not listen by
    assert call(api + "session")[1] == {"admin": False, "user": None}  # who the admin is: not before sign-in
    status, answer, _ = call(api + "session", "POST", {"accessKey": cluster.console_access_key, "secret": "wrong"})
    assert status == 401 and "wrong access key or secret" in answer["error"]

    status, _, cookie = call(
        api + "session", "POST", {"accessKey": cluster.console_access_key, "secret": cluster.console_secret}
    )
    assert status == 200 and "HttpOnly" in cookie and "SameSite=Strict" in cookie
    session = cookie.split(";")[0]
    assert call(api + "session", cookie=session)[1]["admin"] is True
    status, created, _ = call(api + "topics", "POST", {"name": "new-one", "queues": 2}, session)
    assert status == 200 and created["created"] == ["broker-a", "broker-b"]
    status, answer, _ = call(api + "topics", "POST", {"name": "bad name!", "queues": 2}, session)
    assert status == 400 and "bad name!" in answer["error"]
    status, answer, _ = call(api + "topics", "POST", {"name": "x", "queues": None}, session)
    assert status == 400 and "queues must be a whole number" in answer["error"]
    status, reset, _ = call(api + "groups/billing/reset", "POST", {"topic": "orders", "to": "earliest"}, session)
    assert status == 200 and len(reset["offsets"]) == 8
    assert call(api + "topics/nosuch")[0] == 404
    assert call(api + "session", "DELETE", cookie=session)[0] == 200
    assert call(api + "topics", "POST", {"name": "other"}, session)[0] == 401  # signed out
