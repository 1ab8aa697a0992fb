"""``rocketspark admin``: the mqadmin equivalents, as tables."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from rocketspark.cli.common import Add, admin_client, fail, ms, say, table
from rocketspark.client.topic_admin import DEFAULT_QUEUES
from rocketspark.errors import RocketSparkError
from rocketspark.protocol.types import Perm


def admin_clusters(args: argparse.Namespace) -> None:
    """Every broker of every cluster, with the /metrics URL its runtime info gives."""
    with admin_client(args) as admin:
        info = admin.cluster_list()
        urls = admin.servers.metrics_urls(sorted(info["brokers"]))
    rows = []
    for cluster, names in info["clusters"].items():
        for name in names:
            b = info["brokers"][name]
            ago = f"{b['lastUpdateAgoMs']} ms ago"
            rows.append((cluster, name, b["addr"], Perm.describe(b["perm"]), b["topics"], ago, urls[name] or "-"))
    columns = ["cluster", "broker", "address", "perm", "topics count", "last heartbeat", "metrics"]
    table("clusters", columns, rows)
    table("nameservers", ["nameserver", "metrics"], [(a, urls[a] or "-") for a in admin.nameservers])


def admin_topics(args: argparse.Namespace) -> None:
    """Every topic the nameservers know: its kind, logical queues and brokers (mqadmin topicList)."""
    with admin_client(args) as admin:
        topics = admin.describe_topics()
    table(
        "topics",
        ["topic", "kind", "queues", "brokers"],
        [(t.name, t.kind, t.queues, ", ".join(t.brokers)) for t in topics],
    )


def admin_create_topic(args: argparse.Namespace) -> None:
    brokers = args.brokers.split(",") if args.brokers else None
    with admin_client(args) as admin:
        created = admin.create_topic(
            args.topic, queues=args.queues, brokers=brokers, cluster=args.cluster, trace=args.trace
        )
    traced = ", traced" if args.trace else ""
    say(f'topic "{args.topic}" with {args.queues} queues{traced} on: {", ".join(created)}')


def admin_delete_topic(args: argparse.Namespace) -> None:
    with admin_client(args) as admin:
        brokers = admin.delete_topic(args.topic)
    say(f'topic "{args.topic}" deleted from {", ".join(brokers) or "no broker"} and every nameserver')


def admin_route(args: argparse.Namespace) -> None:
    with admin_client(args) as admin:
        route = admin.topic_route(args.topic)
    addresses = {b.broker_name: b.address for b in route.brokers}
    rows = [
        (q.broker_name, addresses.get(q.broker_name, "?"), q.read_queue_nums, q.write_queue_nums, Perm.describe(q.perm))
        for q in route.queues
    ]
    table(f"route of {args.topic}", ["broker", "address", "read queues", "write queues", "perm"], rows)


def admin_status(args: argparse.Namespace) -> None:
    with admin_client(args) as admin:
        queues = admin.topic_status(args.topic)
    rows = []
    for queue in queues:
        for index, seg in enumerate(queue.segments):
            span = f"[{seg.logical_start}, {'' if seg.logical_end is None else seg.logical_end})"
            first = index == 0
            rows.append(
                (
                    queue.queue_id if first else "",
                    queue.min_offset if first else "",
                    queue.max_offset if first else "",
                    seg.broker_name,
                    seg.queue_id,
                    seg.gen,
                    span,
                    seg.state.value,
                    ms(queue.last_store_ms) if first else "",
                )
            )
    table(
        f"status of {args.topic}",
        [
            "queue #",
            "min offset",
            "max offset",
            "broker",
            "physical queue",
            "gen",
            "logical range",
            "state",
            "last stored",
        ],
        rows,
    )


def admin_create_static(args: argparse.Namespace) -> None:
    brokers = args.brokers.split(",") if args.brokers else None
    with admin_client(args) as admin:
        result = admin.create_static_topic(args.topic, queues=args.queues, brokers=brokers)
    table(
        f"static topic {args.topic} (epoch {result.epoch})",
        ["queue #", "broker"],
        result.added,
    )


def _print_remap(result: Any) -> None:
    rows = [(q, src, dst, start) for q, src, dst, start in result.moved]
    rows += [(q, "(new)", dst, 0) for q, dst in result.added]
    table(
        f"remap of {result.topic}: {result.total_queues} logical queues, epoch {result.epoch}",
        ["queue #", "from", "to", "new segment starts at offset"],
        rows,
    )


def admin_remap(args: argparse.Namespace) -> None:
    queues = [int(q) for q in args.queues.split(",")] if args.queues else None
    with admin_client(args) as admin:
        result = admin.remap_static_topic(args.topic, queues, args.to_broker, total_queues=args.total_queues)
    _print_remap(result)


def admin_drain(args: argparse.Namespace) -> None:
    with admin_client(args) as admin:
        results = admin.drain_broker(args.broker, wipe_write_perm=not args.keep_write_perm)
    for result in results:
        _print_remap(result)
    say(
        f"broker {args.broker} leads no logical queue now"
        + ("" if args.keep_write_perm else "; its write permission is wiped (reads continue)")
    )


NO_PROGRESS_EXIT = 3  # `admin progress`: the group has committed nothing on the topic


def admin_progress(args: argparse.Namespace) -> int:
    """A group's committed offsets and lag. A group that committed nothing on the topic (never
    existed, a typo, or has not consumed it yet) is said to be one: exit status 3, no table."""
    with admin_client(args) as admin:
        rows = admin.consumer_progress(args.group, args.topic)
    if all(r.consumer_offset < 0 for r in rows):
        fail(
            f'group "{args.group}" has committed no offset on {args.topic}: no such consumer group, or it has not '
            f"consumed {args.topic} yet (every group and its topics: rocketspark admin groups)"
        )
        return NO_PROGRESS_EXIT
    table(
        f"progress of group {args.group} on {args.topic}",
        ["queue #", "broker", "broker offset", "consumer offset", "lag"],
        [(r.queue_id, r.broker_name, r.broker_offset, r.consumer_offset, r.lag) for r in rows],
    )
    say(f"total lag: {sum(r.lag for r in rows)}")
    return 0


def admin_perm(writable: bool) -> Callable[[argparse.Namespace], None]:
    def run(args: argparse.Namespace) -> None:
        with admin_client(args) as admin:
            (admin.add_write_perm if writable else admin.wipe_write_perm)(args.broker)
        say(f"broker {args.broker}: write permission {'added' if writable else 'wiped'}")

    return run


def admin_counters(args: argparse.Namespace) -> None:
    with admin_client(args) as admin:
        counters = admin.broker_counters(args.broker) if args.broker else admin.nameserver_counters()
    from rocketspark.protocol.codes import RequestCode

    requests = counters.pop("requests", {})
    rows = []
    for code, count in requests.items():
        try:
            name = RequestCode(int(code)).name
        except ValueError:
            name = "MALFORMED OR NOT SERVED" if code == "-1" else "?"
        rows.append((code, name, count))
    table(f"requests served by {args.broker or 'the nameserver'}", ["code", "request", "count"], rows)
    table("counters", ["counter", "value"], [(k, v) for k, v in counters.items() if not isinstance(v, dict)])
    if args.broker:
        rows = [(t, n["messagesIn"], n["messagesOut"]) for t, n in counters.get("topics", {}).items()]
        table(f"messages by topic on {args.broker}", ["topic", "messages in", "messages out"], rows)


def admin_replicas(args: argparse.Namespace) -> None:
    with admin_client(args) as admin:
        groups = admin.replica_groups()
    rows = []
    for name, group in groups.items():
        for r in group.replicas:
            rows.append(
                (
                    name,
                    r.role if r.alive else f"{r.role} (silent)",
                    r.address,
                    r.replica_id,
                    group.epoch,
                    "-" if r.offset < 0 else r.offset,
                    "-" if r.lag is None else r.lag,
                    "yes" if r.in_sync else "no",
                )
            )
    table(
        "replica groups",
        ["group", "role", "address", "replica id", "epoch", "offset", "lag", "in SyncStateSet"],
        rows,
    )
    for name, group in groups.items():
        if group.master is None:
            say(f"group {name} has no master: no live replica of its SyncStateSet (epoch {group.epoch})")


def admin_controller(args: argparse.Namespace) -> None:
    """Each nameserver's controller as it sees itself (mqadmin getControllerMetaData)."""
    rows = []
    with admin_client(args) as admin:
        for address in admin.nameservers:
            try:
                meta = admin.controller_metadata(address)
            except RocketSparkError as exc:
                rows.append((address, "-", "-", "-", "-", exc.message))
                continue
            rows.append(
                (
                    address,
                    meta["self"],
                    meta["controllerLeaderAddress"] or "none",
                    "yes" if meta["isLeader"] else "no",
                    meta["term"],
                    "yes" if meta["hasQuorum"] else "NO",
                )
            )
    table("controllers", ["nameserver", "raft address", "raft leader", "leads", "term", "quorum"], rows)


def admin_switchover(args: argparse.Namespace) -> None:
    with admin_client(args) as admin:
        group = admin.switchover(args.group, to=args.to)
    say(f"group {args.group}: master is now {group.master} (epoch {group.epoch})")


def add_commands(add: Add) -> None:
    add("clusters", admin_clusters, "list clusters and brokers")
    add("topics", admin_topics, "list topics: kind (normal, static, system), logical queues, brokers")
    p = add("create-topic", admin_create_topic, "create or update a topic on every broker (or the ones given)")
    p.add_argument("topic", help="the topic to create or update")
    p.add_argument("--queues", type=int, default=DEFAULT_QUEUES, help="queues per broker")
    p.add_argument("--brokers", help="comma-separated broker names (default: every broker)")
    p.add_argument("--cluster", help="only the brokers of this cluster")
    p.add_argument("--trace", action="store_true", help="record each message's life (admin trace ID)")
    add("delete-topic", admin_delete_topic, "delete a topic everywhere").add_argument(
        "topic", help="the topic to delete"
    )
    add("route", admin_route, "show a topic's route").add_argument("topic", help="the topic")
    p = add("create-static-topic", admin_create_static, "create a static topic of fixed logical queues")
    p.add_argument("topic", help="the static topic to create")
    p.add_argument("--queues", type=int, default=DEFAULT_QUEUES, help="logical queues")
    p.add_argument("--brokers", help="comma-separated broker names (default: every broker)")
    p = add("remap", admin_remap, "move logical queues to a broker (no data copied) or raise the queue count")
    p.add_argument("topic", help="the static topic")
    p.add_argument("--queues", help="comma-separated logical queue ids to move")
    p.add_argument("--to-broker", help="the broker that takes them over")
    p.add_argument("--total-queues", type=int, help="raise the number of logical queues to this")
    p = add("drain-broker", admin_drain, "move every logical queue a broker leads elsewhere")
    p.add_argument("broker", help="the broker (group) to drain")
    p.add_argument("--keep-write-perm", action="store_true", help="do not wipe its write permission")
    add("status", admin_status, "min/max offsets per queue").add_argument("topic", help="the topic")
    p = add("progress", admin_progress, "a consumer group's offsets and lag")
    p.add_argument("group", help="the consumer group")
    p.add_argument("topic", help="a topic it consumes")
    add("wipe-write-perm", admin_perm(False), "stop writes to a broker (drain)").add_argument(
        "broker", help="the broker's name"
    )
    add("add-write-perm", admin_perm(True), "allow writes to a broker again").add_argument(
        "broker", help="the broker's name"
    )
    add("counters", admin_counters, "request counters of the nameserver or a broker").add_argument(
        "--broker", help="a broker's counters instead of the nameserver's"
    )
    add("replicas", admin_replicas, "replica groups: roles, epochs, offsets, lag, SyncStateSet")
    add("controller", admin_controller, "each nameserver's controller: Raft leader, term, quorum")
    p = add("switchover", admin_switchover, "hand a replica group over to one of its in-sync replicas")
    p.add_argument("group", help="the replica group (its broker_name)")
    p.add_argument("--to", required=True, help="address of the replica that becomes master")
