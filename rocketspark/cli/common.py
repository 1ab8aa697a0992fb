"""What every command shares: the console, tables, and the admin client a command connects with."""

from __future__ import annotations

import argparse
import getpass
import json
import os
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from rocketspark.errors import ConfigError
from rocketspark.security.signing import ENV_SECRET_KEY

# How a module of admin commands registers each: add(name, handler, help) -> its parser
Add = Callable[[str, Callable[[argparse.Namespace], int | None], str], argparse.ArgumentParser]

console = Console(width=None if sys.stdout.isatty() else 160)


def ms(ts: int) -> str:
    """A time (ms since the epoch) as every command prints one: UTC, to the millisecond, and
    saying so (``2026-11-26 11:33:49.123 UTC``); 0 is no time, ``-``."""
    if not ts:
        return "-"
    return datetime.fromtimestamp(ts / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"


class Output:
    """Where a command's results go: rich tables and lines for a person, or (``--json``) one
    JSON document for a script, printed when the command ends: ``{"tables": [{"title",
    "columns", "rows": [{column: value}]}], "messages": [...]}`` (and ``"error"`` on failure)."""

    def __init__(self) -> None:
        self.json = False
        self.document: dict[str, Any] = {"tables": [], "messages": []}

    def flush(self) -> None:
        if not self.json:
            return
        print(json.dumps(self.document, default=str))


OUTPUT = Output()


def fail(message: str) -> None:
    """A command's failure, one line: ``error: ...`` on stderr (and in the JSON document)."""
    print(f"error: {message}", file=sys.stderr)
    OUTPUT.document["error"] = message


def say(text: str) -> None:
    """A line for the person running the command (a message in the JSON document)."""
    if OUTPUT.json:
        OUTPUT.document["messages"].append(Text.from_markup(text).plain)
    else:
        console.print(text, soft_wrap=True)


def table(title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    if OUTPUT.json:
        records = [dict(zip(columns, row, strict=True)) for row in rows]
        OUTPUT.document["tables"].append({"title": title, "columns": list(columns), "rows": records})
        return
    shown = Table(title=title, title_justify="left")
    for column in columns:
        shown.add_column(
            column, justify="right" if column.endswith(("offset", "lag", "queues", "count", "#")) else "left"
        )
    for row in rows:
        shown.add_row(*(str(v) for v in row))
    console.print(shown)


def add_connection_arguments(parser: argparse.ArgumentParser) -> None:
    """How ``rocketspark admin`` reaches a cluster with security on. The secret never goes on
    the command line (where ``ps`` and shell history would keep it): it comes from
    ROCKETSPARK_SECRET_KEY, or a prompt."""
    parser.add_argument("-n", "--nameserver", help="nameserver address(es), default $ROCKETSPARK_NAMESRV")
    parser.add_argument(
        "--access-key",
        help="the user to sign as (default $ROCKETSPARK_ACCESS_KEY); the secret: $ROCKETSPARK_SECRET_KEY",
    )
    parser.add_argument("--tls", action="store_true", default=None, help="connect over TLS (default $ROCKETSPARK_TLS)")
    parser.add_argument(
        "--tls-ca-file", help="the CA the servers' certificates are signed by ($ROCKETSPARK_TLS_CA_FILE)"
    )
    parser.add_argument("--tls-cert-file", help="a client certificate, for mutual TLS ($ROCKETSPARK_TLS_CERT_FILE)")
    parser.add_argument("--tls-key-file", help="its key ($ROCKETSPARK_TLS_KEY_FILE)")


def _secret_for(access_key: str) -> str:
    secret = os.environ.get(ENV_SECRET_KEY)
    if secret:
        return secret
    if sys.stdin.isatty():
        return getpass.getpass(f'secret key of "{access_key}": ')
    raise ConfigError(f"--access-key {access_key}: set its secret in {ENV_SECRET_KEY} (never on the command line)")


def client_options(args: argparse.Namespace) -> dict[str, Any]:
    """The security keywords of a client connecting as the command line says."""
    options: dict[str, Any] = {
        "tls": args.tls,
        "tls_ca_file": args.tls_ca_file,
        "tls_cert_file": args.tls_cert_file,
        "tls_key_file": args.tls_key_file,
    }
    if args.access_key:
        options |= {"access_key": args.access_key, "secret_key": _secret_for(args.access_key)}
    return {k: v for k, v in options.items() if v is not None}


def admin_client(args: argparse.Namespace) -> Any:
    from rocketspark.client.admin import Admin

    return Admin(args.nameserver, **client_options(args))
