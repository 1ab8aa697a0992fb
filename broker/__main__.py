"""``python -m broker --conf conf/broker-a.toml``: run one broker in the foreground.

Prints one readiness line, ``broker <name> ready on <host>:<port>``, once it serves
requests; stops cleanly on SIGTERM or Ctrl-C.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys

from broker import config as broker_config
from broker.server import create_server, serve
from rocketspark import logs, loops
from rocketspark.client.nameservers import ENV_NAMESRV, resolve_nameservers
from rocketspark.errors import ConfigError, RocketSparkError


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``python -m broker`` (the CLI reference is made from it)."""
    parser = argparse.ArgumentParser(prog="python -m broker", description="Run a rocketspark broker.")
    parser.add_argument("--conf", help="TOML config file (see conf/broker-a.toml)")
    parser.add_argument("--name", dest="broker_name", help="broker name (overrides the file)")
    parser.add_argument("--cluster", dest="cluster_name", help="cluster name")
    parser.add_argument("--host", dest="listen_host", help="address to listen on")
    parser.add_argument("--port", dest="listen_port", type=int, help="port to listen on; 0 picks a free one")
    parser.add_argument("--data-dir", dest="data_dir", help="store directory")
    parser.add_argument("--nameserver", "-n", help="nameserver addresses, comma separated (host:port)")
    parser.add_argument(
        "--flush-mode", dest="flush_mode", choices=["async", "sync"], help="flush_mode (overrides the file)"
    )
    parser.add_argument("--log-level", default="INFO", help=f"one of {', '.join(logs.LEVELS)}")
    parser.add_argument("--log-format", choices=logs.FORMATS, help="text (default) or json: one event a line")
    return parser


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def load_config(args: argparse.Namespace) -> broker_config.BrokerConfig:
    """The config file with the command line on top; nameservers from ``--nameserver``, the
    file, else ``ROCKETSPARK_NAMESRV``, each address checked as the clients check them."""
    overrides = {k: v for k, v in vars(args).items() if k not in ("conf", "nameserver", "log_level", "log_format")}
    if args.nameserver:
        overrides["nameservers"] = resolve_nameservers(args.nameserver)
    config = broker_config.load(args.conf, **overrides)
    if config.nameservers or os.environ.get(ENV_NAMESRV, "").strip():
        config = dataclasses.replace(config, nameservers=resolve_nameservers(config.nameservers or None))
    return config


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        logs.setup(args.log_level, args.log_format)
    except ValueError as exc:
        print(f"broker: {exc}", file=sys.stderr)
        return 2
    try:
        loops.run(run(load_config(args)))
    except (ConfigError, OSError, ValueError, RocketSparkError) as exc:
        print(f"broker: {exc}", file=sys.stderr)
        return 2
    return 0


async def run(config: broker_config.BrokerConfig) -> None:
    """Create the server inside the event loop (grpc.aio binds to the running loop)."""
    server, _port, broker = create_server(config)

    def ready(address: str) -> None:
        print(f"broker {broker.name} ready on {address}", flush=True)

    await serve(server, broker, ready=ready)


if __name__ == "__main__":
    sys.exit(main())
