"""``rocketspark admin`` for daily work: groups, messages by key or id, offset resets, and a
send and a consume to smoke-test a topic (mqadmin's consumerProgress, queryMsgByKey,
queryMsgById, resetOffsetByTime, sendMessage and consumeMessage)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from rocketspark.cli.common import admin_client, ms, say, table
from rocketspark.client.message_admin import CONSUME_COUNT, CONSUME_WAIT_S, QUERY_MAX_MESSAGES, SEND_COUNT
from rocketspark.errors import InvalidParameterError
from rocketspark.protocol.types import MessageExt

BODY_SHOWN = 60  # characters of a body a table shows


def admin_groups(args: argparse.Namespace) -> None:
    with admin_client(args) as admin:
        groups = admin.groups()
    rows = [(g.group, ", ".join(g.topics) or "-", len(g.members), ", ".join(g.members) or "-", g.lag) for g in groups]
    table("consumer groups", ["group", "topics", "members", "member ids", "lag"], rows)


def _shown(body: bytes) -> str:
    text = body.decode("utf-8", errors="replace")
    return text if len(text) <= BODY_SHOWN else text[: BODY_SHOWN - 3] + "..."


def _message_table(title: str, messages: Sequence[MessageExt]) -> None:
    rows = [
        (
            m.msg_id,
            m.topic,
            m.queue_id,
            m.queue_offset,
            m.broker_name,
            m.tags or "",
            " ".join(m.keys),
            ms(m.store_timestamp),
            _shown(m.body),
        )
        for m in messages
    ]
    columns = ["msg id", "topic", "queue #", "queue offset", "broker", "tag", "keys", "stored", "body"]
    table(title, columns, rows)


def admin_query_msg(args: argparse.Namespace) -> None:
    if (args.key is None) == (args.id is None):
        raise InvalidParameterError("query-msg takes one of --key K (with the topic) and --id ID")
    with admin_client(args) as admin:
        if args.id is not None:
            _message_table(f"message {args.id}", [admin.query_message_by_id(args.id)])
            return
        if not args.topic:
            raise InvalidParameterError("query-msg --key needs the topic: rocketspark admin query-msg TOPIC --key K")
        found = admin.query_messages(args.topic, args.key, max_messages=args.max)
    _message_table(f'messages of {args.topic} with key "{args.key}"', found)
    if not found:
        say(f'no message of {args.topic} carries key "{args.key}" (keys are indexed within a second of the send)')


def admin_trace(args: argparse.Namespace) -> None:
    """A message's trace, as its brokers recorded it (its topic traced), oldest first."""
    with admin_client(args) as admin:
        events = admin.message_trace(args.id)
    rows = [
        (
            datetime.fromtimestamp(e.time_ms / 1000, UTC).isoformat(timespec="milliseconds"),
            e.event,
            e.broker,
            e.topic,
            e.queue_id,
            e.queue_offset,
            e.group or "-",
            e.client or "-",
            "-" if e.cost_ms is None else f"{e.cost_ms:.2f}",
            e.detail,
        )
        for e in events
    ]
    columns = ["time (UTC)", "event", "broker", "topic", "queue #", "queue offset", "group", "client", "cost ms"]
    table(f"trace of message {args.id}", [*columns, "detail"], rows)
    if not events:
        say(
            "nothing recorded: its topic is not traced (admin create-topic --trace, or the brokers' trace_enable), or "
            "the events are not indexed yet (a second or so)"
        )


def parse_time(text: str) -> int:
    """Milliseconds since the epoch, or an ISO 8601 time (UTC unless it says otherwise)."""
    if text.isdigit():
        return int(text)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidParameterError(
            f"--timestamp {text!r} is neither milliseconds since the epoch nor an ISO time such as 2026-11-23T08:00:00"
        ) from None
    return int((moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp() * 1000)


def admin_reset_offset(args: argparse.Namespace) -> None:
    timestamp = parse_time(args.timestamp) if args.timestamp is not None else None
    with admin_client(args) as admin:
        offsets = admin.reset_offset(
            args.group, args.topic, timestamp_ms=timestamp, earliest=args.earliest, latest=args.latest
        )
    table(f"offsets of group {args.group} on {args.topic}, reset", ["queue #", "offset"], sorted(offsets.items()))
    say("running group consumers of the group move there at their next heartbeat")


def admin_send(args: argparse.Namespace) -> None:
    keys = args.keys.split(",") if args.keys else None
    with admin_client(args) as admin:
        results = admin.send_messages(args.topic, args.body.encode(), count=args.count, tags=args.tags, keys=keys)
    rows = [(r.msg_id, r.queue_id, r.queue_offset, r.status.name) for r in results]
    table(f"sent to {args.topic}", ["msg id", "queue #", "queue offset", "status"], rows)


def admin_consume(args: argparse.Namespace) -> None:
    with admin_client(args) as admin:
        found = admin.consume_messages(args.topic, count=args.count, new=args.new, wait_s=args.wait, tags=args.tags)
    _message_table(f"messages of {args.topic}", found)


Add = Callable[[str, Callable[[argparse.Namespace], None], str], argparse.ArgumentParser]


def add_commands(add: Add) -> None:
    add("groups", admin_groups, "consumer groups: topics, members and lag")
    p = add("query-msg", admin_query_msg, "find messages by key (the key index) or by message id or offset id")
    p.add_argument("topic", nargs="?", help="the topic (with --key)")
    p.add_argument("--key", help="a key the message was sent with")
    p.add_argument(
        "--id",
        help="a message id: the one a send returned (MessageExt.msg_id, the Spark source's msgId, a RocketMQ "
        "client's UNIQ_KEY) or an offset id (MessageExt.offset_msg_id)",
    )
    p.add_argument("--max", type=int, default=QUERY_MAX_MESSAGES, help="at most this many messages (--key)")
    p = add("trace", admin_trace, "a message's trace: sent, stored, delivered... as its brokers recorded it")
    p.add_argument("id", help="the message's id (MessageExt.msg_id, a send's msg_id) or its offset id")
    p = add("reset-offset", admin_reset_offset, "move a group's offsets; its running consumers follow")
    p.add_argument("group", help="the consumer group")
    p.add_argument("topic", help="a topic it consumes")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--timestamp", help="the first message stored at or after this time (ms, or ISO 8601)")
    where.add_argument("--earliest", action="store_true", help="the first message still stored")
    where.add_argument("--latest", action="store_true", help="past the newest message (skip the backlog)")
    p = add("send", admin_send, "send a test message (smoke test)")
    p.add_argument("topic", help="the topic (it must exist: nothing is created)")
    p.add_argument("body", help="the message body, as text")
    p.add_argument("--tags", help="the message's tag")
    p.add_argument("--keys", help="comma-separated keys")
    p.add_argument("--count", type=int, default=SEND_COUNT, help="send this many (numbered)")
    p = add("consume", admin_consume, "read a topic's messages without committing (smoke test)")
    p.add_argument("topic", help="the topic")
    p.add_argument("--count", type=int, default=CONSUME_COUNT, help="at most this many messages")
    p.add_argument("--new", action="store_true", help="only messages sent from now on")
    p.add_argument("--wait", type=float, default=CONSUME_WAIT_S, help="seconds to wait for messages")
    p.add_argument("--tags", help="only messages with this tag")
