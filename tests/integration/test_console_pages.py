"""Every page of the web console (issue 30) in real headless Chromium (Debian's, driven by
Playwright), against one real cluster: the overview with its chart, topics and a topic's
detail, messages by time (paged), by key and by id, a message with its body and trace, resending
it to a group (a consumer of that group gets it), groups and a group's members and lag, a reset,
producers, and the DLQ and retry topics. Each page must log no console error, and is saved as a
screenshot: into a temporary directory, or into ``docs/console/<page>.png`` with
``ROCKETSPARK_SCREENSHOTS=docs/console``."""

from __future__ import annotations

import json
import os
import re
import shutil
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, ConsoleMessage, Page, expect, sync_playwright

from rocketspark import Admin, Consumer, LocalCluster, Message, Producer
from rocketspark.client.group_consumer import GroupConsumer
from rocketspark.protocol.types import MessageExt

pytestmark = pytest.mark.integration

WAIT_MS = 30_000  # a generous bound for what the page draws: never how fast the machine is
ORDER = {"order": 1, "items": [{"sku": "A-1", "qty": 2}], "customer": "Ana Lima"}


@dataclass
class World:
    """The cluster the pages show, and the clients kept running while they are looked at."""

    cluster: LocalCluster
    json_sent: Any = None
    binary_sent: Any = None
    received: list[MessageExt] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def got(self, messages: list[MessageExt]) -> None:
        if any(m.tags == "poison" for m in messages):
            raise RuntimeError("poison: sent back, then to the DLQ")
        with self.lock:
            self.received.extend(messages)


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    with LocalCluster(brokers=2) as cluster, Admin(cluster.nameserver) as admin:
        world = World(cluster)
        admin.create_topic("orders", 4, trace=True)
        admin.create_static_topic("events", 2, brokers=["broker-a"])
        with (
            Producer(cluster.nameserver, group="checkout") as producer,
            Consumer(cluster.nameserver) as consumer,
        ):
            producer.send_batch([Message("events", b"e", queue_id=0)] * 300)
            admin.remap_static_topic("events", [0], "broker-b")
            producer.send_batch([Message("events", b"after", queue_id=0)] * 2)  # a segment too short for its label
            producer.send_batch([Message("orders", f"order {i}".encode(), keys=f"k{i}") for i in range(12)])
            world.json_sent = producer.send(Message("orders", json.dumps(ORDER).encode(), tags="new", keys="order-1"))
            world.binary_sent = producer.send(Message("orders", bytes(range(40)), tags="bin"))
            producer.send(Message("orders", b"bad", tags="poison"))
            consumer.commit_offset("audit", "orders", 1, 1)  # a group behind: lag on the topic page
            group = GroupConsumer(
                cluster.nameserver,
                "billing",
                "orders",
                world.got,
                start_from="earliest",
                max_reconsume_times=1,
                retry_delays_ms=[200],
                heartbeat_interval_ms=500,
            ).start()
            try:
                yield world
            finally:
                group.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    executable = shutil.which("chromium") or shutil.which("chromium-browser")
    if executable is None:
        pytest.fail("chromium is not installed: `make test` installs it (apt-get install chromium)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        yield browser
        browser.close()


@dataclass
class Tab:
    page: Page
    errors: list[str]


@pytest.fixture
def tab(browser: Browser, world: World) -> Iterator[Tab]:
    """A fresh browser context (no session) at the console, logging what the page logs."""
    context = browser.new_context(viewport={"width": 1280, "height": 900}, base_url=world.cluster.console_url)
    page = context.new_page()
    errors: list[str] = []

    def logged(message: ConsoleMessage) -> None:
        if message.type in ("error", "warning"):
            errors.append(f"{message.type}: {message.text}")

    page.on("console", logged)
    page.on("pageerror", lambda error: errors.append(f"uncaught: {error}"))
    page.set_default_timeout(WAIT_MS)
    yield Tab(page, errors)
    context.close()


def shown(tab: Tab, path: str) -> Page:
    """Go to ``path`` and wait until its page is drawn."""
    tab.page.goto(path)
    tab.page.wait_for_selector('body[data-loaded="true"]')
    return tab.page


def sign_in(tab: Tab, world: World) -> None:
    page = shown(tab, "/")
    page.fill("#access-key", world.cluster.console_access_key)
    page.fill("#secret", world.cluster.console_secret)
    page.click("#sign-in button")
    page.wait_for_selector("#sign-out:not(.hidden)")


def screenshot(page: Page, name: str, tmp_path: Path) -> None:
    folder = Path(os.environ.get("ROCKETSPARK_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    shot = folder / f"{name}.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000


def cells(page: Page, selector: str) -> list[list[str]]:
    """The text of a table's body cells, row by row."""
    return page.eval_on_selector_all(
        f"{selector} tbody tr", "rows => rows.map(r => [...r.cells].map(c => c.textContent))"
    )


def test_the_error_check_sees_what_a_broken_page_logs(tab: Tab) -> None:
    tab.page.set_content("<script>console.error('probe-logged'); throw new Error('probe-thrown')</script>")
    assert any("probe-logged" in e for e in tab.errors) and any("probe-thrown" in e for e in tab.errors)


def test_the_overview_shows_the_brokers_their_metrics_and_a_chart_per_topic_on_a_time_axis(
    tab: Tab, world: World, tmp_path: Path
) -> None:
    page = shown(tab, "/")
    rows = cells(page, "#brokers")
    assert {(r[1], r[2]) for r in rows} == set(world.cluster.brokers.items())
    assert page.locator("#brokers a.metrics-link").count() == len(world.cluster.brokers)
    with Producer(world.cluster.nameserver) as producer:  # a few seconds of traffic for the chart
        deadline = time.monotonic() + 60
        while page.locator('#chart polyline.topic-line[data-name="orders"]').count() == 0:
            assert time.monotonic() < deadline, "no line for topic orders on the chart"
            producer.send_batch([Message("orders", b"o" * 100)] * 200)
            page.wait_for_timeout(300)
    assert page.locator("#chart polyline.throughput").count() == 1  # the total
    labels = page.locator("#chart text.time-label").all_text_contents()
    assert 2 <= len(labels) <= 7 and all(len(t) == 8 and t[2] == ":" and t[5] == ":" for t in labels)  # 11:33:49
    assert "topic orders" in page.locator(".legend").first.text_content()  # type: ignore[operator]
    screenshot(page, "overview", tmp_path)
    assert tab.errors == []


def test_topics_and_a_topic_show_queues_route_config_groups_and_a_static_topics_segments(
    tab: Tab, world: World, tmp_path: Path
) -> None:
    page = shown(tab, "/topics")
    names = [r[0] for r in cells(page, "#topics")]
    assert "orders" in names and "events" in names
    screenshot(page, "topics", tmp_path)
    page.click('#topics a[href="/topics/orders"]')  # a link followed in the page, its URL the topic's
    page.wait_for_selector("#queues")
    assert page.url.endswith("/topics/orders")
    page.go_back()  # the history the links made
    page.wait_for_selector('body[data-page="topics"][data-loaded="true"] #topics')
    page.go_forward()
    page.wait_for_selector('body[data-page="topic"][data-loaded="true"] #queues')
    queues = cells(page, "#queues")
    assert [int(r[0]) for r in queues] == list(range(8))  # the topic's numbering: 0-7 over both brokers
    assert {r[1] for r in queues} == {"broker-a", "broker-b"}
    assert sum(int(r[4]) for r in queues) >= 15
    assert sorted((r[0], r[4], r[5]) for r in cells(page, "#route")) == [("broker-a", "4", "4"), ("broker-b", "4", "4")]
    assert sorted((r[0], r[4]) for r in cells(page, "#config")) == [("broker-a", "yes"), ("broker-b", "yes")]
    groups = {r[0]: int(r[2]) for r in cells(page, "#topic-groups")}
    assert groups["audit"] > 0 and "billing" in groups
    expect(page.locator(".rates")).to_have_text(re.compile(r"^in \d"), timeout=WAIT_MS)  # sampled rates
    screenshot(page, "topic", tmp_path)

    page = shown(tab, "/topics/events")
    segments = page.eval_on_selector_all(
        'svg[data-topic="events"] rect.segment', "rs => rs.map(r => [r.dataset.queue, r.dataset.broker])"
    )
    assert sorted(map(tuple, segments)) == [("0", "broker-a"), ("0", "broker-b"), ("1", "broker-a")]  # queue 0 moved
    ends = page.eval_on_selector_all("rect.segment", "rs => rs.map(r => r.x.baseVal.value + r.width.baseVal.value)")
    assert max(ends) <= 900  # the viewBox's width: the short segment is drawn whole, not cut off
    labels = page.locator("svg.timeline text.segment-label").all_text_contents()
    assert labels == ["broker-a · gen 0", "broker-a · gen 0"]  # whole; the short segment's is in its tooltip
    short = page.locator('rect.segment[data-broker="broker-b"] title').text_content()
    assert short is not None and short.startswith("broker-b gen 1 ") and short.endswith(", 2 messages")
    assert [r[4] for r in cells(page, "#queues")] == ["302", "0"]  # messages, not the remap's gap in offsets
    screenshot(page, "topic-static", tmp_path)
    assert tab.errors == []


def test_messages_need_a_sign_in_then_page_by_time_and_find_by_key(tab: Tab, world: World, tmp_path: Path) -> None:
    page = shown(tab, "/messages?topic=orders")
    assert "Sign in as the admin" in page.locator("#page").inner_text()  # a body is data: not asked for
    sign_in(tab, world)
    page = shown(tab, "/messages?topic=orders&limit=5")
    first = cells(page, "#messages")
    assert len(first) == 5
    stored = [r[0] for r in first]
    assert stored == sorted(stored, reverse=True)  # newest first
    page.click("a.older")  # the API's cursor, as a link
    page.wait_for_url(re.compile(r"cursor="))
    page.wait_for_selector('body[data-loaded="true"] #messages')
    older = cells(page, "#messages")
    assert older and not {r[1] for r in older} & {r[1] for r in first} and older[0][0] <= first[-1][0]
    screenshot(page, "messages", tmp_path)

    page = shown(tab, "/messages")
    page.fill("#by-key input[name=topic]", "orders")
    page.fill("#by-key input[name=key]", "order-1")
    page.click("#by-key button")
    page.wait_for_selector("#messages")
    [row] = cells(page, "#messages")
    assert row[1] == world.json_sent.msg_id and row[5] == "new" and '"order": 1' in row[8]
    assert "key=order-1" in page.url
    assert tab.errors == []


def wait_for_trace(page: Page, path: str, events: set[str]) -> list[str]:
    """Reload the message's page until its trace shows ``events`` (the brokers index trace
    events within a second or so)."""
    deadline = time.monotonic() + 30
    while True:
        page = shown_page(page, path)
        seen = page.locator("#trace circle.trace-event").evaluate_all("cs => cs.map(c => c.dataset.event)")
        if events <= set(seen) or time.monotonic() > deadline:
            return seen
        page.wait_for_timeout(500)


def shown_page(page: Page, path: str) -> Page:
    page.goto(path)
    page.wait_for_selector('body[data-loaded="true"]')
    return page


def test_a_message_by_either_id_shows_its_body_and_trace_and_is_resent_to_a_group(
    tab: Tab, world: World, tmp_path: Path
) -> None:
    sign_in(tab, world)
    sent = world.json_sent
    page = shown(tab, "/messages")
    page.fill("#by-id input[name=id]", sent.offset_msg_id)  # the offset id finds it too
    page.click("#by-id button")
    page.wait_for_selector("#body")
    assert page.locator("#body").text_content() == json.dumps(ORDER, indent=2)  # pretty-printed
    seen = wait_for_trace(page, f"/messages/{sent.msg_id}", {"sent", "stored", "delivered"})
    assert {"sent", "stored", "delivered"} <= set(seen), seen
    assert page.locator("#trace text.axis-label").count() == 6
    assert "billing" in page.locator("#trace").text_content()  # type: ignore[operator]  # its group's lane
    facts = dict((r[0], r[1]) for r in cells(page, "#message"))
    assert facts["msg id"] == sent.msg_id and facts["keys"] == "order-1" and facts["tag"] == "new"
    screenshot(page, "message", tmp_path)

    page.select_option("#resend select", "billing")
    page.click("#resend button")
    page.wait_for_selector("#status:not(.hidden)")
    assert "resent to group billing: %RETRY%billing" in page.locator("#status").text_content()  # type: ignore[operator]
    deadline = time.monotonic() + 30
    while sum(m.body == sent_body() for m in list(world.received)) < 2:  # once sent, once resent
        assert time.monotonic() < deadline, "the resent copy never reached the group"
        time.sleep(0.2)

    page = shown(tab, f"/messages/{world.binary_sent.msg_id}")
    assert page.locator("#body").text_content().startswith("00000000  00 01 02 03")  # type: ignore[union-attr]
    assert "tracing is off" not in page.locator("#page").inner_text()
    assert tab.errors == []


def sent_body() -> bytes:
    return json.dumps(ORDER).encode()


def test_groups_show_members_lag_per_queue_and_reset(tab: Tab, world: World, tmp_path: Path) -> None:
    page = shown(tab, "/groups")
    groups = {r[0]: r for r in cells(page, "#groups")}
    assert "billing" in groups and "audit" in groups
    screenshot(page, "groups", tmp_path)
    page = shown(tab, "/groups/billing")
    page.wait_for_selector("#members")
    [member] = cells(page, "#members")
    assert member[2] == "PYTHON" and member[4] == "rocketspark" and "orders" in member[5]
    assert len(cells(page, "#lag-orders")) == 8
    screenshot(page, "group", tmp_path)

    sign_in(tab, world)
    page = shown(tab, "/groups/audit")
    assert cells(page, "#lag-orders")[1][3] == "1"  # committed 1 on queue 1
    page.click('button[data-reset="orders:latest"]')
    page.wait_for_selector("#status:not(.hidden)")
    assert "reset to latest" in page.locator("#status").text_content()  # type: ignore[operator]
    with Admin(world.cluster.nameserver) as admin:
        assert sum(p.lag for p in admin.consumer_progress("audit", "orders")) == 0
    assert tab.errors == []


def test_producers_show_each_groups_connections(tab: Tab, world: World, tmp_path: Path) -> None:
    with Producer(world.cluster.nameserver, group="checkout") as producer:
        producer.send(Message("orders", b"hello"))
        page = shown(tab, "/producers")
        page.wait_for_selector("#producers-checkout")
        rows = cells(page, "#producers-checkout")
        assert rows and all(r[2] == "PYTHON" and r[4] == "rocketspark" for r in rows)
        screenshot(page, "producers", tmp_path)
    assert tab.errors == []


def test_the_dlq_page_lists_retry_and_dead_letter_topics_to_browse(tab: Tab, world: World, tmp_path: Path) -> None:
    deadline = time.monotonic() + 60
    while True:  # the poison message: failed, sent back, failed again, dead-lettered
        page = shown(tab, "/dlq")
        kinds = {(r[0], r[1]) for r in cells(page, "#dlq")} if page.locator("#dlq").count() else set()
        if {("%RETRY%billing", "retry"), ("%DLQ%billing", "dlq")} <= kinds or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert {("%RETRY%billing", "retry"), ("%DLQ%billing", "dlq")} <= kinds
    screenshot(page, "dlq", tmp_path)
    sign_in(tab, world)
    page = shown(tab, "/dlq")
    page.click('#dlq a[href="/messages?topic=%25DLQ%25billing"]')
    page.wait_for_selector("#messages")
    assert [r[5] for r in cells(page, "#messages")] == ["poison"]
    page.click("#messages tbody a")  # the dead letter's page: resend it to its group once its consumer is fixed
    page.wait_for_selector('body[data-page="message"][data-loaded="true"] #resend')
    assert page.locator("#resend select").input_value() == "billing"  # the DLQ's own group, chosen
    assert page.locator("#body").text_content() == "bad"
    assert tab.errors == []
