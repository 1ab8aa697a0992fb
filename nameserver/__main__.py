"""``python -m nameserver``: run a nameserver in the foreground.

Prints ``nameserver ready on <host>:<port>`` once it serves requests; stops cleanly on SIGTERM
or Ctrl-C.
"""

from __future__ import annotations

import argparse
import sys

from nameserver import config as ns_config
from nameserver.server import create_server, serve
from rocketspark import logs, loops
from rocketspark.errors import ConfigError


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``python -m nameserver`` (the CLI reference is made from it)."""
    parser = argparse.ArgumentParser(prog="python -m nameserver", description="Run a rocketspark nameserver.")
    parser.add_argument("--conf", help="TOML config file (see conf/nameserver.toml)")
    parser.add_argument("--host", dest="listen_host", help="address to listen on")
    parser.add_argument("--port", dest="listen_port", type=int, help="port to listen on; 0 picks a free one")
    parser.add_argument("--data-dir", dest="data_dir", help="where it keeps the brokers it served (known-brokers.json)")
    parser.add_argument("--log-level", default="INFO", help=f"one of {', '.join(logs.LEVELS)}")
    parser.add_argument("--log-format", choices=logs.FORMATS, help="text (default) or json: one event a line")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        logs.setup(args.log_level, args.log_format)
    except ValueError as exc:
        print(f"nameserver: {exc}", file=sys.stderr)
        return 2
    try:
        config = ns_config.load(
            args.conf, listen_host=args.listen_host, listen_port=args.listen_port, data_dir=args.data_dir
        )
        loops.run(run(config))
    except (ConfigError, OSError) as exc:
        print(f"nameserver: {exc}", file=sys.stderr)
        return 2
    return 0


async def run(config: ns_config.NameServerConfig) -> None:
    server, _port, nameserver = create_server(config)
    await serve(server, nameserver, ready=lambda address: print(f"nameserver ready on {address}", flush=True))


if __name__ == "__main__":
    sys.exit(main())
