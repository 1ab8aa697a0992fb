"""``rocketspark admin`` for daily work: groups, messages by key, id or time, a message resent
to a group, offset resets, and a send and a consume to smoke-test a topic (mqadmin's
consumerProgress, queryMsgByKey, queryMsgById, printMsg, resendMsg... , resetOffsetByTime,
sendMessage and consumeMessage)."""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

from rocketspark.cli.common import OUTPUT, Add, admin_client, ms, say, table
from rocketspark.client.browse import DEFAULT_LIMIT, MAX_LIMIT
from rocketspark.client.logical import queue_numbering
from rocketspark.client.message_admin import CONSUME_COUNT, CONSUME_WAIT_S, QUERY_MAX_MESSAGES, SEND_COUNT
from rocketspark.errors import InvalidParameterError
from rocketspark.protocol.group_topics import retry_topic
from rocketspark.protocol.types import MessageExt, SendResult
from rocketspark.times import parse_time

if TYPE_CHECKING:
    from rocketspark.client.admin import Admin

BODY_SHOWN = 60  # characters of a body a table shows


def admin_groups(args: argparse.Namespace) -> None:
    with admin_client(args) as admin:
        groups = admin.groups()
    rows = [(g.group, ", ".join(g.topics) or "-", len(g.members), ", ".join(g.members) or "-", g.lag) for g in groups]
    table("consumer groups", ["group", "topics", "members", "member ids", "lag"], rows)


def _shown(body: bytes) -> str:
    text = body.decode("utf-8", errors="replace")
    return text if len(text) <= BODY_SHOWN else text[: BODY_SHOWN - 3] + "..."


class Numbering:
    """The topic's queue id (``Consumer.queues``, Spark's ``queueId``, ``admin progress``) of a
    message or send result, which carries its broker's own queue id for a normal topic: each
    topic's route is read once per command."""

    def __init__(self, admin: Admin) -> None:
        self.admin = admin
        self.ids: dict[str, dict[tuple[str, int], int]] = {}
        self.unknown: set[str] = set()  # brokers whose queues have no number now

    def __call__(self, topic: str, broker_name: str, queue_id: int) -> int | str:
        if topic not in self.ids:
            self.ids[topic] = queue_numbering(self.admin, topic)
        number = self.ids[topic].get((broker_name, queue_id))
        if number is None:
            self.unknown.add(broker_name)
            return "?"
        return number

    def explain(self) -> None:
        if self.unknown:
            say(
                f"queue # ?: {', '.join(sorted(self.unknown))} is not among the topic's readable brokers now "
                "(down, its read permission wiped, or the topic deleted); the broker column says where"
            )


def _message_table(title: str, messages: Sequence[MessageExt], number: Numbering | None) -> None:
    """``number``: relabel broker queue ids (query results); None: they are the topic's already
    (a consumer's pull)."""
    rows = [
        (
            m.msg_id,
            m.topic,
            m.queue_id if number is None else number(m.topic, m.broker_name, m.queue_id),
            m.broker_name,
            m.queue_offset,
            m.tags or "",
            " ".join(m.keys),
            ms(m.store_timestamp),
            _shown(m.body),
        )
        for m in messages
    ]
    columns = ["msg id", "topic", "queue #", "broker", "queue offset", "tag", "keys", "stored", "body"]
    table(title, columns, rows)
    if number is not None:
        number.explain()


def admin_query_msg(args: argparse.Namespace) -> None:
    if (args.key is None) == (args.id is None):
        raise InvalidParameterError("query-msg takes one of --key K (with the topic) and --id ID")
    with admin_client(args) as admin:
        if args.id is not None:
            _message_table(f"message {args.id}", [admin.query_message_by_id(args.id)], Numbering(admin))
            return
        if not args.topic:
            raise InvalidParameterError("query-msg --key needs the topic: rocketspark admin query-msg TOPIC --key K")
        found = admin.query_messages(args.topic, args.key, max_messages=args.max)
        _message_table(f'messages of {args.topic} with key "{args.key}"', found, Numbering(admin))
    if not found:
        say(f'no message of {args.topic} carries key "{args.key}" (keys are indexed within a second of the send)')


def admin_trace(args: argparse.Namespace) -> None:
    """A message's trace, as its brokers recorded it (its topic traced), oldest first."""
    with admin_client(args) as admin:
        events = admin.message_trace(args.id)
        number = Numbering(admin)
        rows = [
            (
                ms(e.time_ms),
                e.event,
                e.broker,
                e.topic,
                number(e.topic, e.broker, e.queue_id),
                e.queue_offset,
                e.group or "-",
                e.client or "-",
                "-" if e.cost_ms is None else f"{e.cost_ms:.2f}",
                e.detail,
            )
            for e in events
        ]
    columns = ["time", "event", "broker", "topic", "queue #", "queue offset", "group", "client", "cost ms"]
    table(f"trace of message {args.id}", [*columns, "detail"], rows)
    number.explain()
    if not events:
        say(
            "nothing recorded: its topic is not traced (admin create-topic --trace, or the brokers' trace_enable), or "
            "the events are not indexed yet (a second or so)"
        )


def admin_print_msg(args: argparse.Namespace) -> None:
    """A page of a topic's messages by store time, newest first, and the next page's cursor."""
    start = parse_time(args.begin, "--begin") if args.begin is not None else None
    end = parse_time(args.end, "--end") if args.end is not None else None
    with admin_client(args) as admin:
        page = admin.browse_messages(args.topic, start_ms=start, end_ms=end, limit=args.limit, cursor=args.cursor)
    span = f"stored from {'the first' if start is None else ms(start)} to {'the newest' if end is None else ms(end)}"
    _message_table(f"messages of {args.topic} {span}, newest first", page.messages, None)
    if page.cursor is None:
        say("no more messages in this range")
    else:
        say(f"next page: rocketspark admin print-msg {args.topic} --cursor {page.cursor}")
    if OUTPUT.json:
        OUTPUT.document["cursor"] = page.cursor


def admin_resend_msg(args: argparse.Namespace) -> None:
    """A message sent again to one group, through its retry topic."""
    with admin_client(args) as admin:
        result = admin.resend_message(args.id, args.group)
    table(
        f"message {args.id} resent to group {args.group}",
        ["new msg id", "topic", "broker", "queue offset", "status"],
        [(result.msg_id, retry_topic(args.group), result.broker_name, result.queue_offset, result.status.name)],
    )
    say(f"only group {args.group} consumes it again (its group consumers and RocketMQ 4.x push consumers)")


def admin_reset_offset(args: argparse.Namespace) -> None:
    timestamp = parse_time(args.timestamp) if args.timestamp is not None else None
    with admin_client(args) as admin:
        offsets = admin.reset_offset(
            args.group, args.topic, timestamp_ms=timestamp, earliest=args.earliest, latest=args.latest
        )
        brokers = {q.queue_id: q.segments[-1].broker_name if q.segments else "" for q in admin.queues(args.topic)}
    table(
        f"offsets of group {args.group} on {args.topic}, reset",
        ["queue #", "broker", "offset"],
        [(q, brokers.get(q, "?"), offset) for q, offset in sorted(offsets.items())],
    )
    if timestamp is None:
        say(f"reset to {'the earliest message still stored' if args.earliest else 'past the newest message'}")
    else:
        say(f"reset to the first message stored at or after {ms(timestamp)} ({timestamp} ms since the epoch)")
    say("running group consumers of the group move there at their next heartbeat")


def admin_send(args: argparse.Namespace) -> None:
    keys = args.keys.split(",") if args.keys else None
    with admin_client(args) as admin:
        results = admin.send_messages(args.topic, args.body.encode(), count=args.count, tags=args.tags, keys=keys)
        number = Numbering(admin)
        numbered = [(r, number(args.topic, r.broker_name, r.queue_id)) for r in results]
    if len(numbered) == 1:
        [(r, queue)] = numbered
        table(
            f"sent to {args.topic}",
            ["msg id", "queue #", "broker", "queue offset", "status"],
            [(r.msg_id, queue, r.broker_name, r.queue_offset, r.status.name)],
        )
    else:
        _send_summary(args.topic, numbered)
    number.explain()


def _send_summary(topic: str, numbered: list[tuple[SendResult, int | str]]) -> None:
    """Many sends as one table (per broker: how many, to which queues) and the first and last."""
    per_broker: dict[str, list[int | str]] = {}
    for r, queue in numbered:
        per_broker.setdefault(r.broker_name, []).append(queue)
    table(
        f"sent {len(numbered)} messages to {topic}",
        ["broker", "queues #", "messages"],
        [(broker, _ranges(queues), len(queues)) for broker, queues in sorted(per_broker.items())],
    )
    statuses = Counter(r.status.name for r, _ in numbered)
    say("status: " + ", ".join(f"{name} {n}" for name, n in sorted(statuses.items())))
    for which, (r, queue) in (("first", numbered[0]), ("last", numbered[-1])):
        say(f"{which}: msg id {r.msg_id}, queue #{queue} on {r.broker_name}, queue offset {r.queue_offset}")


def _ranges(queues: list[int | str]) -> str:
    """``0-3, 7``: the distinct queue numbers, runs joined (``?`` for a queue without one)."""
    numbers = sorted({q for q in queues if isinstance(q, int)})
    runs: list[list[int]] = []
    for q in numbers:
        if runs and q == runs[-1][1] + 1:
            runs[-1][1] = q
        else:
            runs.append([q, q])
    shown = [str(a) if a == b else f"{a}-{b}" for a, b in runs]
    return ", ".join(shown + (["?"] if len(numbers) < len(set(queues)) else []))


def admin_consume(args: argparse.Namespace) -> None:
    with admin_client(args) as admin:
        found = admin.consume_messages(args.topic, count=args.count, new=args.new, wait_s=args.wait, tags=args.tags)
    _message_table(f"messages of {args.topic}", found, None)


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
    p = add("print-msg", admin_print_msg, "a topic's messages by store time, newest first, a page at a time")
    p.add_argument("topic", help="the topic (a group's retry or dead-letter topic too)")
    times = "ms since the epoch, or ISO 8601 (UTC unless it names a zone: 2026-11-23T08:00:00)"
    p.add_argument("--begin", help=f"only messages stored at or after this time: {times}")
    p.add_argument("--end", help=f"only messages stored before this time: {times}")
    p.add_argument("--limit", type=int, default=DEFAULT_LIMIT, help=f"messages a page (1-{MAX_LIMIT})")
    p.add_argument("--cursor", help="the next page: the cursor the previous page printed (same topic and times)")
    p = add("resend-msg", admin_resend_msg, "send a message again to one consumer group (through its retry topic)")
    p.add_argument("id", help="the message's id (MessageExt.msg_id, a send's msg_id) or its offset id")
    p.add_argument("--group", required=True, help="the consumer group that is to consume it again")
    p = add("reset-offset", admin_reset_offset, "move a group's offsets; its running consumers follow")
    p.add_argument("group", help="the consumer group")
    p.add_argument("topic", help="a topic it consumes")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument(
        "--timestamp",
        help="the first message stored at or after this time: ms since the epoch, or ISO 8601 (UTC unless it "
        "names a zone: 2026-11-23T08:00:00, 2026-11-23T09:00:00+01:00)",
    )
    where.add_argument("--earliest", action="store_true", help="the first message still stored")
    where.add_argument("--latest", action="store_true", help="past the newest message (skip the backlog)")
    p = add("send", admin_send, "send a test message (smoke test)")
    p.add_argument("topic", help="the topic (it must exist: nothing is created)")
    p.add_argument("body", help="the message body, as text")
    p.add_argument("--tags", help="the message's tag")
    p.add_argument("--keys", help="comma-separated keys")
    p.add_argument(
        "--count", type=int, default=SEND_COUNT, help="send this many (numbered); more than one prints a summary"
    )
    p = add("consume", admin_consume, "read a topic's messages without committing (smoke test)")
    p.add_argument("topic", help="the topic")
    p.add_argument("--count", type=int, default=CONSUME_COUNT, help="at most this many messages")
    p.add_argument("--new", action="store_true", help="only messages sent from now on")
    p.add_argument("--wait", type=float, default=CONSUME_WAIT_S, help="seconds to wait for messages")
    p.add_argument("--tags", help="only messages with this tag")
