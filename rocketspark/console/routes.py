"""What the console answers, by path: the pages (every one the same ``index.html``, whose
script draws the page its URL names) and the JSON API, each route a pattern and a function of
the console's calls. The HTTP machinery (sessions, headers, errors) is ``server``'s; this is
the table it dispatches on, so a reader sees every page and API in one place."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from rocketspark.console import cluster_views, group_views, message_views, topic_views
from rocketspark.console.throughput import Throughput
from rocketspark.errors import InvalidParameterError
from rocketspark.times import parse_time

# the console's pages: /, /topics, /topics/<name>, /messages, /messages/<id>, /groups,
# /groups/<name>, /producers, /dlq
PAGE = re.compile(r"/(?:(?:topics|messages|groups)(?:/[^/]+)?|producers|dlq)?/?")


class ConsoleAdmin(
    cluster_views.ClusterReader,
    topic_views.TopicReader,
    message_views.MessageReader,
    group_views.GroupReader,
    Protocol,
):
    """Everything the views read and the changes below make: the console's view of an ``Admin``
    (the server hands its ``Admin`` over as this, so mypy checks one against the other)."""

    def create_topic(self, topic: str, queues: int = ...) -> list[str]: ...

    def reset_offset(
        self, group: str, topic: str, *, timestamp_ms: int | None = None, earliest: bool = False, latest: bool = False
    ) -> dict[int, int]: ...


class Calls(Protocol):
    """What a route uses of the console: its admin calls (one at a time) and the sampler."""

    throughput: Throughput

    def call(self, view: Callable[..., Any], *args: Any) -> Any: ...


Query = dict[str, list[str]]
Handler = Callable[[Calls, "re.Match[str]", Query], Any]


@dataclass(frozen=True)
class Route:
    pattern: re.Pattern[str]
    handler: Handler
    signed_in: bool = False  # reads a message body: the cluster's data, not its shape


def param(query: Query, name: str) -> str | None:
    values = query.get(name)
    return values[-1] if values else None


def time_param(query: Query, name: str) -> int | None:
    text = param(query, name)
    return None if text in (None, "") else parse_time(str(text), name)


def _messages(console: Calls, _: re.Match[str], query: Query) -> Any:
    topic = param(query, "topic")
    if not topic:
        raise InvalidParameterError(
            "give topic=<name>, with start= and end= (milliseconds or ISO 8601, UTC unless zoned) or key=<key>"
        )
    key = param(query, "key")
    if key:
        return console.call(message_views.by_key, topic, key)
    limit = message_views.page_limit(param(query, "limit"))
    start, end = time_param(query, "start"), time_param(query, "end")
    return console.call(message_views.browse, topic, start, end, limit, param(query, "cursor") or None)


def _topic(console: Calls, match: re.Match[str], _: Query) -> Any:
    detail = console.call(topic_views.topic, match[1])
    return {**detail, "rates": console.throughput.topic_rates(match[1])}


def _call(view: Callable[..., Any]) -> Handler:
    """A route answering ``view`` of the admin, with the path's captured parts as arguments."""
    return lambda console, match, _: console.call(view, *match.groups())


GETS = (
    Route(re.compile("overview"), _call(cluster_views.overview)),
    Route(re.compile("topics"), _call(topic_views.topics)),
    Route(re.compile("topics/([^/]+)"), _topic),
    Route(re.compile("groups"), _call(group_views.groups)),
    Route(re.compile("groups/([^/]+)"), _call(group_views.group)),
    Route(re.compile("producers"), _call(group_views.producers)),
    Route(re.compile("dlq"), _call(group_views.dlq)),
    Route(re.compile("messages"), _messages, signed_in=True),
    Route(re.compile("messages/([^/]+)"), _call(message_views.message), signed_in=True),
    Route(re.compile("throughput"), lambda console, _, __: console.throughput.series()),
)


def find(routes: tuple[Route, ...], path: str) -> tuple[Route, re.Match[str]] | None:
    """The route whose pattern is the whole (percent-decoded) ``path``, and its match."""
    for route in routes:
        match = route.pattern.fullmatch(path)
        if match is not None:
            return route, match
    return None


# -- changes (the server has checked the session and the X-Console header) ---------------------

Change = Callable[[Calls, "re.Match[str]", dict[str, Any]], Any]


def _create_topic(console: Calls, _: re.Match[str], body: dict[str, Any]) -> Any:
    queues = body.get("queues", 8)
    if not isinstance(queues, int) or isinstance(queues, bool):
        raise InvalidParameterError(f"queues must be a whole number of queues, not {queues!r}")
    return {"created": console.call(lambda a: a.create_topic(str(body.get("name", "")), queues=queues))}


def _reset(console: Calls, match: re.Match[str], body: dict[str, Any]) -> Any:
    group, to, topic = match[1], str(body.get("to", "")), str(body.get("topic", ""))
    if to in ("earliest", "latest"):
        offsets = console.call(lambda a: a.reset_offset(group, topic, earliest=to == "earliest", latest=to == "latest"))
    else:  # a time as the CLI takes it: milliseconds, or ISO 8601 (UTC unless zoned)
        at = parse_time(to, 'reset "to" (or "earliest", "latest")')
        offsets = console.call(lambda a: a.reset_offset(group, topic, timestamp_ms=at))
    return {"offsets": offsets}


def _resend(console: Calls, match: re.Match[str], body: dict[str, Any]) -> Any:
    return console.call(message_views.resend, match[1], str(body.get("group", "")))


POSTS: tuple[tuple[re.Pattern[str], Change], ...] = (
    (re.compile("topics"), _create_topic),
    (re.compile("groups/([^/]+)/reset"), _reset),
    (re.compile("messages/([^/]+)/resend"), _resend),
)
