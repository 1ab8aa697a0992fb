"""The console's pure view logic, without a cluster: a body's preview (JSON, text, hex), the
trace timeline's layout, per-topic rates from the brokers' counters, the paging parameters and
the API's route table. Admin calls go through a small fake behind the views' Protocols."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest

from rocketspark.client.connection_admin import ClientConnection, Subscribed
from rocketspark.console import group_views, message_views, routes, trace_layout
from rocketspark.console.preview import TEXT_SHOWN, hex_dump, preview
from rocketspark.console.throughput import Throughput, per_second, topic_totals
from rocketspark.errors import InvalidParameterError
from rocketspark.protocol.trace import TraceEvent
from rocketspark.protocol.types import MessageExt


def test_a_json_body_is_pretty_printed() -> None:
    shown = preview(json.dumps({"order": 7, "items": ["a", "ü"]}).encode())
    assert shown["kind"] == "json" and not shown["truncated"]
    assert shown["text"] == '{\n  "order": 7,\n  "items": [\n    "a",\n    "ü"\n  ]\n}'


def test_text_is_shown_as_it_is_and_something_that_only_looks_like_json_is_text() -> None:
    assert preview("héllo\nworld".encode()) == {"kind": "text", "text": "héllo\nworld", "bytes": 12, "truncated": False}
    assert preview(b"{not json")["kind"] == "text"
    assert preview(b"") == {"kind": "empty", "text": "", "bytes": 0, "truncated": False}


def test_a_long_text_is_cut_and_says_so() -> None:
    shown = preview(b"x" * (TEXT_SHOWN + 10))
    assert shown["truncated"] and len(shown["text"]) == TEXT_SHOWN and shown["bytes"] == TEXT_SHOWN + 10


def test_binary_is_a_hex_dump_like_hexdump_c() -> None:
    body = bytes(range(20))
    shown = preview(body)
    assert shown["kind"] == "binary" and shown["text"] == hex_dump(body)
    first, second = shown["text"].splitlines()
    assert first == "00000000  00 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f  |................|"
    assert second.startswith("00000010  10 11 12 13") and second.endswith("|....|")
    assert preview(b"ab\x00cd")["kind"] == "binary"  # valid UTF-8, but a control character: binary
    assert hex_dump(b"Hi!")[-5:] == "|Hi!|"


def event(time_ms: int, kind: str, group: str = "") -> TraceEvent:
    return TraceEvent(time_ms, kind, "broker-a", "orders", 1, 5, group, "client", None, "")


def test_the_trace_timeline_puts_sends_first_then_a_lane_per_group_on_one_axis() -> None:
    layout = trace_layout.timeline(
        [
            event(1300, "delivered", "billing"),
            event(1000, "sent"),
            event(1100, "stored"),
            event(1500, "delivered", "audit"),
        ]
    )
    assert layout["lanes"] == ["sent and stored", "group billing", "group audit"]
    assert [(e["event"], e["lane"], e["at"]) for e in layout["events"]] == [
        ("sent", 0, 0.0),
        ("stored", 0, 0.2),
        ("delivered", 1, 0.6),
        ("delivered", 2, 1.0),
    ]
    assert (layout["startMs"], layout["endMs"]) == (1000, 1500)
    assert [t["timeMs"] for t in layout["ticks"]] == [1000, 1100, 1200, 1300, 1400, 1500]


def test_an_empty_trace_has_no_events_and_one_event_sits_at_the_start() -> None:
    assert trace_layout.timeline([])["events"] == []
    assert [e["at"] for e in trace_layout.timeline([event(5, "sent")])["events"]] == [0.0]


def test_per_topic_totals_add_the_brokers_and_rates_never_go_negative() -> None:
    counters = {
        "broker-a": {"topics": {"orders": {"messagesIn": 10, "messagesOut": 4}}},
        "broker-b": {"topics": {"orders": {"messagesIn": 5, "messagesOut": 1}, "events": {"messagesIn": 2}}},
    }
    assert topic_totals(counters) == {"orders": (15, 5), "events": (2, 0)}
    assert per_second({"a": 10, "b": 50}, {"a": 30, "b": 0, "c": 9}, 2.0) == {"a": 10.0, "b": 0.0}
    assert per_second({"a": 1}, {"a": 2}, 0) == {}


@dataclass
class FakeCounters:
    """Brokers whose counters the test sets between samples."""

    figures: dict[str, dict[str, Any]] = field(default_factory=dict)

    def brokers(self) -> dict[str, str]:
        return {name: f"address-of-{name}" for name in self.figures}

    def counters_at(self, address: str) -> dict[str, Any]:
        return self.figures[address.removeprefix("address-of-")]


def figures(stored: int, orders_in: int, orders_out: int) -> dict[str, Any]:
    return {"messagesStored": stored, "topics": {"orders": {"messagesIn": orders_in, "messagesOut": orders_out}}}


def test_the_sampler_gives_total_per_broker_and_per_topic_rates_from_the_second_reading() -> None:
    counters = FakeCounters({"broker-a": figures(100, 100, 0)})
    sampler = Throughput(counters)
    sampler.sample(now=1000.0)
    assert sampler.series() == [] and sampler.topic_rates("orders") is None
    counters.figures["broker-a"] = figures(300, 300, 50)
    sampler.sample(now=1002.0)
    [sample] = sampler.series()
    assert sample == {
        "t": 1_002_000,
        "total": 100.0,
        "brokers": {"broker-a": 100.0},
        "topics": {"orders": {"in": 100.0, "out": 25.0}},
    }
    assert sampler.topic_rates("orders") == {"in": 100.0, "out": 25.0}
    assert sampler.topic_rates("other") is None


def test_the_page_size_is_checked_with_a_message_saying_what_to_give() -> None:
    assert message_views.page_limit(None) == message_views.DEFAULT_LIMIT
    assert message_views.page_limit("50") == 50  # its range is browse_messages' (the API test sees 0 refused)
    for bad in ("ten", "-1", "1.5"):
        with pytest.raises(InvalidParameterError, match="limit must be a number of messages from 1 to 200"):
            message_views.page_limit(bad)


def test_a_bad_time_parameter_names_itself_and_the_forms_it_takes() -> None:
    assert (
        routes.time_param({"start": ["2026-11-26T11:33:49"]}, "start")
        == datetime(2026, 11, 26, 11, 33, 49, tzinfo=UTC).timestamp() * 1000
    )  # UTC, unzoned
    assert routes.time_param({}, "end") is None
    with pytest.raises(InvalidParameterError, match="start 'yesterday' is neither milliseconds"):
        routes.time_param({"start": ["yesterday"]}, "start")


def test_the_route_table_finds_each_page_and_api() -> None:
    for page in ("/", "/topics", "/topics/orders", "/messages", "/messages/AB12", "/groups/g", "/producers", "/dlq"):
        assert routes.PAGE.fullmatch(page), page
    assert not routes.PAGE.fullmatch("/nothing")
    found = routes.find(routes.GETS, "messages/AB12")
    assert found is not None and found[0].signed_in and found[1].groups() == ("AB12",)
    found = routes.find(routes.GETS, "topics/%DLQ%billing")
    assert found is not None and found[1][1] == "%DLQ%billing"
    assert routes.find(routes.GETS, "nothing") is None


@dataclass
class Page:
    messages: list[MessageExt]
    cursor: str | None


class FakeMessages:
    """The message views' admin: one topic of two messages, nothing traced."""

    def __init__(self) -> None:
        self.asked: dict[str, Any] = {}
        self.stored = [
            MessageExt("orders", 0, 7, b'{"a": 1}', "T", ["k1"], {"KEYS": "k1"}, 1000, 1001, 0, "broker-a"),
            MessageExt("orders", 0, 6, b"\x00\x01", None, None, None, 900, 901, 0, "broker-a"),
        ]

    def queues(self, topic: str) -> list[Any]:
        raise InvalidParameterError("no queue numbering in this fake")

    def browse_messages(
        self,
        topic: str,
        *,
        start_ms: int | None = None,
        end_ms: int | None = None,
        limit: int = 20,
        cursor: str | None = None,
    ) -> Page:
        self.asked = {"topic": topic, "start_ms": start_ms, "end_ms": end_ms, "limit": limit, "cursor": cursor}
        return Page(self.stored[:limit], "next" if limit < len(self.stored) else None)


def test_a_page_of_messages_has_rows_with_a_body_snippet_and_the_cursor_for_older_ones() -> None:
    admin = FakeMessages()
    page = message_views.browse(admin, "orders", 100, 2000, 1, None)  # type: ignore[arg-type]
    assert admin.asked == {"topic": "orders", "start_ms": 100, "end_ms": 2000, "limit": 1, "cursor": None}
    assert page["cursor"] == "next" and len(page["messages"]) == 1
    row = page["messages"][0]
    assert (row["queueOffset"], row["snippet"], row["keys"], row["queueId"]) == (7, '{   "a": 1 }', ["k1"], None)
    assert message_views.browse(admin, "orders", None, None, 5, None)["messages"][1]["snippet"] == "(binary)"  # type: ignore[arg-type]


def test_a_resend_needs_a_group() -> None:
    with pytest.raises(InvalidParameterError, match='resend needs "group"'):
        message_views.resend(FakeMessages(), "id", "")  # type: ignore[arg-type]


def connection(client_id: str, subscriptions: tuple[Subscribed, ...] = ()) -> ClientConnection:
    return ClientConnection(
        client_id, "127.0.0.1:5000", "PYTHON", "0.1.0", "rocketspark", ("broker-a",), 1, subscriptions
    )


@dataclass(frozen=True)
class GT:
    topic: str
    group: str
    kind: str
    messages: int


@dataclass(frozen=True)
class Progress:
    queue_id: int
    broker_name: str
    broker_offset: int
    consumer_offset: int
    lag: int


@dataclass(frozen=True)
class Info:
    group: str
    topics: tuple[str, ...]
    members: tuple[str, ...] = ()
    lag: int = 0


class FakeListing:
    def __call__(self) -> list[Info]:
        return [Info("billing", ("orders", "%RETRY%billing"))]

    def heard_of(self) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
        return {"billing": {"orders", "%RETRY%billing"}}, {"billing": {"c1"}}


class FakeGroups:
    groups = FakeListing()

    def consumer_progress(self, group: str, topic: str) -> list[Progress]:
        return [Progress(0, "broker-a", 10, 4, 6), Progress(1, "broker-b", 3, -1, 3)]

    def consumer_connections(self, group: str) -> list[ClientConnection]:
        subscribed = (Subscribed("orders", "TAG", "*"), Subscribed("payments", "SQL92", "a > 1"))
        return [connection("c1", subscribed)]

    def producer_groups(self) -> dict[str, list[ClientConnection]]:
        return {"checkout": [connection("p1")], "audit": []}

    def group_topics(self) -> list[GT]:
        return [
            GT("%RETRY%billing", "billing", "retry", 2),
            GT("%DLQ%billing", "billing", "dlq", 1),
            GT("%DLQ%x", "x", "dlq", 0),
        ]


def test_a_group_has_its_members_lag_per_topic_apart_from_its_retry_and_dlq_topics() -> None:
    view = group_views.group(FakeGroups(), "billing")  # type: ignore[arg-type]
    assert [m["clientId"] for m in view["members"]] == ["c1"]
    assert view["members"][0]["subscriptions"][1] == {
        "topic": "payments",
        "expressionType": "SQL92",
        "expression": "a > 1",
    }
    assert [(p["topic"], p["lag"], len(p["queues"])) for p in view["progress"]] == [
        ("orders", 9, 2),
        ("payments", 9, 2),
    ]
    assert [t["topic"] for t in view["groupTopics"]] == ["%RETRY%billing", "%DLQ%billing"]
    assert [g["group"] for g in group_views.producers(FakeGroups())] == ["audit", "checkout"]  # type: ignore[arg-type]
    assert [(t["group"], t["kind"]) for t in group_views.dlq(FakeGroups())] == [  # type: ignore[arg-type]
        ("billing", "dlq"),
        ("billing", "retry"),
        ("x", "dlq"),
    ]
