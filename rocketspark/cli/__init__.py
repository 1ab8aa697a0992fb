"""The ``rocketspark`` command: run a local cluster as a sidecar, and administer a cluster.

    rocketspark cluster up --brokers 2                 nameserver + brokers, foreground
    rocketspark cluster up --brokers 1 --replicas 3    one replica group of three, with the controller
    rocketspark admin -n 127.0.0.1:9876 clusters       the mqadmin equivalents, as tables
    rocketspark admin create-topic orders --queues 8
    rocketspark admin status orders
    rocketspark admin consumer-connection etl         who is connected: address, language, subscriptions
    rocketspark cluster up --auth --tls                users, permissions and TLS on (a development CA)
    rocketspark admin user create etl                  users and policies, on every server
    rocketspark admin acl set etl Topic:orders Pub,Sub

Every admin command takes ``-n/--nameserver`` (or ``ROCKETSPARK_NAMESRV``), and for a cluster
with security on ``--access-key`` (the secret from ``ROCKETSPARK_SECRET_KEY``) and ``--tls``/
``--tls-ca-file`` (or their environment variables), and ``--json`` for one JSON document
instead of tables. Errors print one line, ``error: ...``, and exit with status 1
(``admin progress`` of a group that committed nothing on the topic: status 3). A topic's
queues are numbered as ``Consumer.queues`` and Spark's ``queueId`` number them, with the
broker in its own column; times print in UTC and say so, and times given without a zone are
read as UTC.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable

from rocketspark.cli import acl, admin, cluster_up, connections, ops, package_job
from rocketspark.cli.common import OUTPUT, add_connection_arguments, fail
from rocketspark.errors import RocketSparkError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rocketspark", description="rocketspark sidecar and admin tool")
    sub = parser.add_subparsers(dest="command", required=True)
    cluster_up.add_parser(sub)
    package_job.add_parser(sub)

    admin_parser = sub.add_parser("admin", help="administer a cluster")
    add_connection_arguments(admin_parser)
    admin_parser.add_argument(
        "--json", action="store_true", help="print one JSON document instead of tables (anywhere on the line)"
    )
    cmds = admin_parser.add_subparsers(dest="action", required=True)

    def add(name: str, func: Callable[[argparse.Namespace], int | None], help_text: str) -> argparse.ArgumentParser:
        p = cmds.add_parser(name, help=help_text)
        p.set_defaults(func=func)
        return p

    admin.add_commands(add)
    ops.add_commands(add)
    connections.add_commands(add)
    acl.add_commands(cmds)
    return parser


def run() -> None:
    """The console script: ``main``, then out at once. Every client was closed by then; a
    background thread of gRPC's must not keep a finished command from exiting."""
    code = main()
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def main(argv: list[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    if "--json" in words and "admin" in words:  # taken after the command too: `admin status orders --json`
        words.remove("--json")
        words.insert(words.index("admin") + 1, "--json")
    words, job_args = package_job.split_job_arguments(words)
    args = build_parser().parse_args(words)
    if job_args:
        args.job_args = [*args.job_args, *job_args]
    OUTPUT.json = bool(getattr(args, "json", False))
    try:
        result = args.func(args)
    except RocketSparkError as exc:  # a bad setting (ConfigError) and a failed cluster (ClusterError) too
        return _failed(exc.message)
    except (OSError, ValueError) as exc:  # a port or directory unusable, a bad log level or format
        return _failed(str(exc))
    except KeyboardInterrupt:
        return 130
    OUTPUT.flush()
    return int(result or 0)


def _failed(message: str) -> int:
    fail(message)
    OUTPUT.flush()
    return 1
