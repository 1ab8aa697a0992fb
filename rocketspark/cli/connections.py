"""``rocketspark admin consumer-connection GROUP``, ``producer-connection GROUP`` and
``producers``: who is connected (mqadmin's ``consumerConnection`` and ``producerConnection``),
one row per client, merged over every broker."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from rocketspark.cli.common import Add, admin_client, ms, say, table
from rocketspark.client.connection_admin import ClientConnection

COLUMNS = ["client id", "address", "language", "version", "protocol", "brokers", "last heard"]


def _row(c: ClientConnection) -> list[object]:
    return [c.client_id, c.address, c.language, c.version, c.protocol, ", ".join(c.brokers), ms(c.last_seen_ms)]


def _subscriptions(c: ClientConnection) -> str:
    return "; ".join(f"{s.topic} {s.expression_type} {s.expression}" for s in c.subscriptions) or "-"


def consumer_connection(args: argparse.Namespace) -> None:
    with admin_client(args) as admin:
        clients = admin.consumer_connections(args.group)
    rows = [[*_row(c), _subscriptions(c)] for c in clients]
    table(f"clients of consumer group {args.group}", [*COLUMNS, "subscriptions"], rows)
    if not clients:
        say(f'no client of consumer group "{args.group}" is connected (every group: rocketspark admin groups)')


def _producers(title: str, rows: Sequence[list[object]]) -> None:
    table(title, ["producer group", *COLUMNS], rows)


def producer_connection(args: argparse.Namespace) -> None:
    with admin_client(args) as admin:
        clients = admin.producer_connections(args.group)
    _producers(f"clients of producer group {args.group}", [[args.group, *_row(c)] for c in clients])
    if not clients:
        say(f'no client of producer group "{args.group}" is connected (every group: rocketspark admin producers)')


def producers(args: argparse.Namespace) -> None:
    with admin_client(args) as admin:
        groups = admin.producer_groups()
    _producers("producer groups", [[group, *_row(c)] for group, clients in groups.items() for c in clients])


def add_commands(add: Add) -> None:
    p = add("consumer-connection", consumer_connection, "a consumer group's clients: address, language, subscriptions")
    p.add_argument("group", help="the consumer group")
    p = add("producer-connection", producer_connection, "a producer group's clients: address, language, version")
    p.add_argument("group", help="the producer group (a RocketMQ 5 producer's: each topic it publishes to)")
    add("producers", producers, "every producer group and its clients")
