"""``rocketspark cluster up``: a local cluster in the foreground, as a sidecar."""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import threading
import time
from pathlib import Path
from typing import Any

from rocketspark import logs
from rocketspark.cli.common import console, table
from rocketspark.security.client_side import FIELDS
from rocketspark.security.private import write_private


def cluster_up(args: argparse.Namespace) -> int:
    from rocketspark.cluster import LocalCluster

    fmt = logs.log_format(args.log_format)
    logs.setup(args.log_level, fmt)
    os.environ[logs.ENV_LOG_FORMAT] = fmt  # the servers' own processes (--processes) log alike

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
        auth=args.auth,
        tls=args.tls or args.tls_mutual,
        tls_mutual=args.tls_mutual,
        console_port=args.console_port,
        metrics_port=args.metrics_port,
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    cluster.start()
    try:
        if args.replicas > 1:
            _wait_for_replica_groups(cluster, stop)
        _print_servers(cluster, args.replicas)
        console.print(f"data in {cluster.data_dir}; export ROCKETSPARK_NAMESRV={cluster.nameserver}; Ctrl-C stops")
        _announce_security(cluster)
        _announce_metrics(cluster)
        _announce_console(cluster)
        if cluster.grpc_endpoints:  # what the official RocketMQ 5 clients are given as endpoints
            print(f"grpc v2 endpoint ready on {cluster.grpc_endpoint}", flush=True)
        print(f"cluster ready on {cluster.nameserver}", flush=True)
        while not stop.wait(0.5):
            pass
    finally:
        console.print("stopping...")
        cluster.stop()
        console.print("stopped cleanly")
    return 0


def add_parser(sub: Any) -> None:
    up = sub.add_parser("cluster", help="run a local cluster").add_subparsers(dest="action", required=True)
    run = up.add_parser("up", help="start a nameserver and brokers in the foreground; Ctrl-C stops")
    run.add_argument("--brokers", type=int, default=2, help="broker groups, named broker-a, broker-b, ...")
    run.add_argument(
        "--replicas", type=int, default=1, help="replicas per broker group (>1: the controller elects masters)"
    )
    run.add_argument("--port", type=int, default=9876, help="nameserver port (0: any free port)")
    run.add_argument("--data-dir", help="store directory (default: a temporary one, deleted at stop)")
    run.add_argument("--flush-mode", choices=["async", "sync"], help="the brokers' flush_mode (default async)")
    run.add_argument("--no-auto-create", action="store_true", help="turn auto_create_topic_enable off")
    run.add_argument("--processes", action="store_true", help="one process per server instead of one in all")
    run.add_argument("--auth", action="store_true", help="users and permissions on: an admin user is made")
    run.add_argument("--tls", action="store_true", help="TLS on every port, with a development CA")
    run.add_argument("--tls-mutual", action="store_true", help="with --tls: clients must show a certificate")
    run.add_argument(
        "--metrics-port",
        type=int,
        default=0,
        help="the nameserver's /metrics port N; the brokers get N+1, N+2... in order, then each group's "
        "further replicas (0: each picks a free port)",
    )
    run.add_argument("--console-port", type=int, default=0, help="the web console's port (0: any free port)")
    run.add_argument("--log-level", default="WARNING", help="the servers' log level (default WARNING)")
    run.add_argument("--log-format", choices=logs.FORMATS, help="text (default) or json: one event a line")
    run.set_defaults(func=cluster_up)


def _print_servers(cluster: Any, replicas: int) -> None:
    """The start-up table: each server's address and the /metrics URL Prometheus scrapes."""
    urls = cluster.metrics_urls
    rows = [("nameserver", "-", cluster.nameserver, urls.get("nameserver", "-"))]
    for name in cluster.brokers:
        for i, address in enumerate(cluster.replicas_of(name) or [cluster.brokers[name]]):
            key = name if replicas == 1 else f"{name}-r{i}"
            rows.append(("broker" if replicas == 1 else f"replica {i}", name, address, urls.get(key, "-")))
    table("rocketspark cluster", ["role", "name", "address", "metrics"], rows)


def _wait_for_replica_groups(cluster: Any, stop: threading.Event, timeout_s: float = 60.0) -> None:
    """With replicas, "cluster ready" means every replica of every group is in its SyncStateSet:
    a switchover the user types next needs an in-sync replica, and a slave joins only once it
    has connected to its master and caught up (a second or so). Past ``timeout_s`` it is said."""
    from rocketspark.client.admin import Admin

    deadline = time.monotonic() + timeout_s
    with Admin(cluster.nameserver, **cluster.client_options) as admin:
        while not stop.is_set():
            groups = admin.replica_groups()
            if len(groups) == len(cluster.brokers) and all(
                len(group.sync_state_set) == cluster.replica_count for group in groups.values()
            ):
                return
            if time.monotonic() > deadline:
                console.print(
                    f"not every replica is in its group's SyncStateSet after {timeout_s:.0f} s: see admin replicas"
                )
                return
            stop.wait(0.2)


def _announce_security(cluster: Any) -> None:
    """Say where the development CA is and how to connect, without printing a secret: the
    admin's credentials go to a file only this user can read."""
    if cluster.tls_ca_file:
        console.print(
            f"TLS on: development CA {cluster.tls_ca_file} (certificates in {Path(cluster.tls_ca_file).parent})"
        )
    options = cluster.client_options
    if not options:
        return
    names = {f.keyword: f.env for f in FIELDS}
    lines = [f"export ROCKETSPARK_NAMESRV={cluster.nameserver}"]
    lines += [
        f"export {names[k]}={shlex.quote(str(v).lower() if isinstance(v, bool) else str(v))}"
        for k, v in options.items()
    ]
    env_file = Path(cluster.data_dir) / "client.env"
    write_private(env_file, ("\n".join(lines) + "\n").encode())
    who = f'the admin user "{cluster.admin_access_key}"' if cluster.auth else "clients"
    console.print(f"to connect as {who}: source {env_file}")


def _announce_metrics(cluster: Any) -> None:
    """Where Prometheus scrapes, and (in a file only this user can read) the token it sends."""
    if not cluster.metrics_urls:
        return
    print(f"metrics for Prometheus: {' '.join(cluster.metrics_urls.values())}", flush=True)
    if cluster.metrics_token:
        token_file = Path(cluster.data_dir) / "metrics.token"
        write_private(token_file, cluster.metrics_token.encode())
        console.print(
            f"/metrics want a bearer token: the one in {token_file} (Prometheus: authorization: "
            f"{{credentials_file: {token_file}}})"
        )


def _announce_console(cluster: Any) -> None:
    """Where the console is, and (in a file only this user can read) how to sign in as admin."""
    env_file = Path(cluster.data_dir) / "console.env"
    lines = [
        f"ROCKETSPARK_CONSOLE_URL={cluster.console_url}",
        f"ROCKETSPARK_CONSOLE_ACCESS_KEY={shlex.quote(cluster.console_access_key)}",
        f"ROCKETSPARK_CONSOLE_SECRET={shlex.quote(cluster.console_secret)}",
    ]
    write_private(env_file, ("\n".join(lines) + "\n").encode())
    print(f"console ready on {cluster.console_url}", flush=True)
    console.print(f"to sign in to the console as admin: the access key and secret in {env_file}")
