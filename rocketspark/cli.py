"""The ``rocketspark`` command: run a local cluster as a sidecar, and administer a cluster.

    rocketspark cluster up --brokers 2                 nameserver + brokers, foreground
    rocketspark cluster up --brokers 1 --replicas 3    one replica group of three, with the controller
    rocketspark admin -n 127.0.0.1:9876 clusters       the mqadmin equivalents, as tables
    rocketspark admin create-topic orders --queues 8
    rocketspark admin status orders

Every admin command takes ``-n/--nameserver`` (or ``ROCKETSPARK_NAMESRV``). Errors print one
line, ``error: ...``, and exit with status 1.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from rich.console import Console
from rich.table import Table

from rocketspark.errors import ClusterError, ConfigError, RocketSparkError
from rocketspark.protocol.types import Perm

console = Console(width=None if sys.stdout.isatty() else 160)


def _ms(ts: int) -> str:
    return datetime.fromtimestamp(ts / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S") if ts else "-"


def _table(title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    table = Table(title=title, title_justify="left")
    for column in columns:
        table.add_column(
            column, justify="right" if column.endswith(("offset", "lag", "queues", "count", "#")) else "left"
        )
    for row in rows:
        table.add_row(*(str(v) for v in row))
    console.print(table)


# -- cluster up ------------------------------------------------------------------------------


def cluster_up(args: argparse.Namespace) -> int:
    from rocketspark.cluster import LocalCluster

    config: dict[str, Any] = {}
    if args.flush_mode:
        config["flush_mode"] = args.flush_mode
    if args.no_auto_create:
        config["auto_create_topic_enable"] = False
    cluster = LocalCluster(
        brokers=args.brokers,
        data_dir=args.data_dir,
        broker_config=config,
        nameserver_config={"listen_port": args.port},
        processes=args.processes,
        replicas=args.replicas,
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    cluster.start()
    try:
        _table(
            "rocketspark cluster",
            ["role", "name", "address"],
            [("nameserver", "-", cluster.nameserver)]
            + [
                ("broker" if args.replicas == 1 else f"replica {i}", n, a)
                for n in cluster.brokers
                for i, a in enumerate(cluster.replicas_of(n) or [cluster.brokers[n]])
            ],
        )
        console.print(f"data in {cluster.data_dir}; export ROCKETSPARK_NAMESRV={cluster.nameserver}; Ctrl-C stops")
        print(f"cluster ready on {cluster.nameserver}", flush=True)
        while not stop.wait(0.5):
            pass
    finally:
        console.print("stopping...")
        cluster.stop()
        console.print("stopped cleanly")
    return 0


# -- admin ------------------------------------------------------------------------------------


def _admin(args: argparse.Namespace) -> Any:
    from rocketspark.client.admin import Admin

    return Admin(args.nameserver)


def admin_clusters(args: argparse.Namespace) -> None:
    with _admin(args) as admin:
        info = admin.cluster_list()
    rows = []
    for cluster, names in info["clusters"].items():
        for name in names:
            b = info["brokers"][name]
            rows.append(
                (cluster, name, b["addr"], Perm.describe(b["perm"]), b["topics"], f"{b['lastUpdateAgoMs']} ms ago")
            )
    _table("clusters", ["cluster", "broker", "address", "perm", "topics count", "last heartbeat"], rows)


def admin_create_topic(args: argparse.Namespace) -> None:
    brokers = args.brokers.split(",") if args.brokers else None
    with _admin(args) as admin:
        created = admin.create_topic(args.topic, queues=args.queues, brokers=brokers, cluster=args.cluster)
    console.print(f'topic "{args.topic}" with {args.queues} queues on: {", ".join(created)}')


def admin_delete_topic(args: argparse.Namespace) -> None:
    with _admin(args) as admin:
        brokers = admin.delete_topic(args.topic)
    console.print(f'topic "{args.topic}" deleted from {", ".join(brokers) or "no broker"} and every nameserver')


def admin_route(args: argparse.Namespace) -> None:
    with _admin(args) as admin:
        route = admin.topic_route(args.topic)
    addresses = {b.broker_name: b.address for b in route.brokers}
    rows = [
        (q.broker_name, addresses.get(q.broker_name, "?"), q.read_queue_nums, q.write_queue_nums, Perm.describe(q.perm))
        for q in route.queues
    ]
    _table(f"route of {args.topic}", ["broker", "address", "read queues", "write queues", "perm"], rows)


def admin_status(args: argparse.Namespace) -> None:
    with _admin(args) as admin:
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
                    _ms(queue.last_store_ms) if first else "",
                )
            )
    _table(
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
    with _admin(args) as admin:
        result = admin.create_static_topic(args.topic, queues=args.queues, brokers=brokers)
    _table(
        f"static topic {args.topic} (epoch {result.epoch})",
        ["queue #", "broker"],
        result.added,
    )


def _print_remap(result: Any) -> None:
    rows = [(q, src, dst, start) for q, src, dst, start in result.moved]
    rows += [(q, "(new)", dst, 0) for q, dst in result.added]
    _table(
        f"remap of {result.topic}: {result.total_queues} logical queues, epoch {result.epoch}",
        ["queue #", "from", "to", "new segment starts at offset"],
        rows,
    )


def admin_remap(args: argparse.Namespace) -> None:
    queues = [int(q) for q in args.queues.split(",")] if args.queues else None
    with _admin(args) as admin:
        result = admin.remap_static_topic(args.topic, queues, args.to_broker, total_queues=args.total_queues)
    _print_remap(result)


def admin_drain(args: argparse.Namespace) -> None:
    with _admin(args) as admin:
        results = admin.drain_broker(args.broker, wipe_write_perm=not args.keep_write_perm)
    for result in results:
        _print_remap(result)
    console.print(
        f"broker {args.broker} leads no logical queue now"
        + ("" if args.keep_write_perm else "; its write permission is wiped (reads continue)")
    )


def admin_progress(args: argparse.Namespace) -> None:
    with _admin(args) as admin:
        rows = admin.consumer_progress(args.group, args.topic)
    _table(
        f"progress of group {args.group} on {args.topic}",
        ["queue #", "broker", "broker offset", "consumer offset", "lag"],
        [(r.queue_id, r.broker_name, r.broker_offset, r.consumer_offset, r.lag) for r in rows],
    )
    console.print(f"total lag: {sum(r.lag for r in rows)}")


def admin_perm(writable: bool) -> Callable[[argparse.Namespace], None]:
    def run(args: argparse.Namespace) -> None:
        with _admin(args) as admin:
            (admin.add_write_perm if writable else admin.wipe_write_perm)(args.broker)
        console.print(f"broker {args.broker}: write permission {'added' if writable else 'wiped'}")

    return run


def admin_counters(args: argparse.Namespace) -> None:
    with _admin(args) as admin:
        counters = admin.broker_counters(args.broker) if args.broker else admin.nameserver_counters()
    from rocketspark.protocol.codes import RequestCode

    requests = counters.pop("requests", {})
    rows = []
    for code, count in requests.items():
        try:
            name = RequestCode(int(code)).name
        except ValueError:
            name = "MALFORMED" if code == "-1" else "?"
        rows.append((code, name, count))
    _table(f"requests served by {args.broker or 'the nameserver'}", ["code", "request", "count"], rows)
    _table("counters", ["counter", "value"], [(k, v) for k, v in counters.items() if not isinstance(v, dict)])


def admin_replicas(args: argparse.Namespace) -> None:
    with _admin(args) as admin:
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
    _table(
        "replica groups",
        ["group", "role", "address", "replica id", "epoch", "offset", "lag", "in SyncStateSet"],
        rows,
    )
    for name, group in groups.items():
        if group.master is None:
            console.print(f"group {name} has no master: no live replica of its SyncStateSet (epoch {group.epoch})")


def admin_controller(args: argparse.Namespace) -> None:
    """Each nameserver's controller as it sees itself (mqadmin getControllerMetaData)."""
    rows = []
    with _admin(args) as admin:
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
    _table("controllers", ["nameserver", "raft address", "raft leader", "leads", "term", "quorum"], rows)


def admin_switchover(args: argparse.Namespace) -> None:
    with _admin(args) as admin:
        group = admin.switchover(args.group, to=args.to)
    console.print(f"group {args.group}: master is now {group.master} (epoch {group.epoch})")


# -- parser -----------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rocketspark", description="rocketspark sidecar and admin tool")
    sub = parser.add_subparsers(dest="command", required=True)

    up = sub.add_parser("cluster", help="run a local cluster").add_subparsers(dest="action", required=True)
    run = up.add_parser("up", help="start a nameserver and brokers in the foreground; Ctrl-C stops")
    run.add_argument("--brokers", type=int, default=2)
    run.add_argument(
        "--replicas", type=int, default=1, help="replicas per broker group (>1: the controller elects masters)"
    )
    run.add_argument("--port", type=int, default=9876, help="nameserver port (0: any free port)")
    run.add_argument("--data-dir", help="store directory (default: a temporary one, deleted at stop)")
    run.add_argument("--flush-mode", choices=["async", "sync"])
    run.add_argument("--no-auto-create", action="store_true", help="turn auto_create_topic_enable off")
    run.add_argument("--processes", action="store_true", help="one process per server instead of one in all")
    run.set_defaults(func=cluster_up)

    admin = sub.add_parser("admin", help="administer a cluster")
    admin.add_argument("-n", "--nameserver", help="nameserver address(es), default $ROCKETSPARK_NAMESRV")
    cmds = admin.add_subparsers(dest="action", required=True)

    def add(name: str, func: Callable[[argparse.Namespace], None], help_text: str) -> argparse.ArgumentParser:
        p = cmds.add_parser(name, help=help_text)
        p.set_defaults(func=func)
        return p

    add("clusters", admin_clusters, "list clusters and brokers")
    p = add("create-topic", admin_create_topic, "create or update a topic on every broker (or the ones given)")
    p.add_argument("topic")
    p.add_argument("--queues", type=int, default=8, help="queues per broker")
    p.add_argument("--brokers", help="comma-separated broker names (default: every broker)")
    p.add_argument("--cluster", help="only the brokers of this cluster")
    add("delete-topic", admin_delete_topic, "delete a topic everywhere").add_argument("topic")
    add("route", admin_route, "show a topic's route").add_argument("topic")
    p = add("create-static-topic", admin_create_static, "create a static topic of fixed logical queues")
    p.add_argument("topic")
    p.add_argument("--queues", type=int, default=8, help="logical queues")
    p.add_argument("--brokers", help="comma-separated broker names (default: every broker)")
    p = add("remap", admin_remap, "move logical queues to a broker (no data copied) or raise the queue count")
    p.add_argument("topic")
    p.add_argument("--queues", help="comma-separated logical queue ids to move")
    p.add_argument("--to-broker", help="the broker that takes them over")
    p.add_argument("--total-queues", type=int, help="raise the number of logical queues to this")
    p = add("drain-broker", admin_drain, "move every logical queue a broker leads elsewhere")
    p.add_argument("broker")
    p.add_argument("--keep-write-perm", action="store_true", help="do not wipe its write permission")
    add("status", admin_status, "min/max offsets per queue").add_argument("topic")
    p = add("progress", admin_progress, "a consumer group's offsets and lag")
    p.add_argument("group")
    p.add_argument("topic")
    add("wipe-write-perm", admin_perm(False), "stop writes to a broker (drain)").add_argument("broker")
    add("add-write-perm", admin_perm(True), "allow writes to a broker again").add_argument("broker")
    add("counters", admin_counters, "request counters of the nameserver or a broker").add_argument(
        "--broker", help="a broker's counters instead of the nameserver's"
    )
    add("replicas", admin_replicas, "replica groups: roles, epochs, offsets, lag, SyncStateSet")
    add("controller", admin_controller, "each nameserver's controller: Raft leader, term, quorum")
    p = add("switchover", admin_switchover, "hand a replica group over to one of its in-sync replicas")
    p.add_argument("group")
    p.add_argument("--to", required=True, help="address of the replica that becomes master")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        result = args.func(args)
    except RocketSparkError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 1
    except (ConfigError, ClusterError, OSError) as exc:  # a bad setting; a port or directory unusable
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
