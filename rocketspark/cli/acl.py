"""``rocketspark admin user ...`` and ``acl ...``: users and policies, changed on every broker
and nameserver (``Admin.create_user`` and kin; see ``rocketspark.client.acl_admin``)."""

from __future__ import annotations

import argparse
import secrets
import sys
from typing import Any

from rocketspark.cli.common import admin_client, say, table
from rocketspark.errors import ConfigError


def _report(what: str, change: Any) -> int:
    say(f"{what} (user table version {change.version}, on {len(change.applied)} servers)")
    for address, why in change.missed.items():
        say(f"[yellow]missed by {address}[/yellow]: {why} (it catches up when it next registers)")
    return 0


def _given_secret(args: argparse.Namespace) -> str | None:
    """A secret read from stdin's first line (``--secret-key-stdin``): never a command-line
    argument, which ``ps`` and shell history would keep."""
    if not args.secret_key_stdin:
        return None
    secret = sys.stdin.readline().strip()
    if not secret:
        raise ConfigError("--secret-key-stdin: stdin's first line is empty; give the secret there")
    return secret


def user_create(args: argparse.Namespace) -> int:
    given = _given_secret(args)
    secret = given or secrets.token_urlsafe(24)
    with admin_client(args) as admin:
        change = admin.create_user(args.name, secret, super_user=args.super)
    if not given:  # made here: shown once, as a cloud console shows a new key
        say(f'secret key of "{args.name}" (shown once; store it now): {secret}')
    return _report(f'user "{args.name}" created' + (" (super user)" if args.super else ""), change)


def user_update(args: argparse.Namespace) -> int:
    given = _given_secret(args)
    secret = given or (secrets.token_urlsafe(24) if args.new_secret else None)
    super_user = True if args.super else False if args.normal else None
    with admin_client(args) as admin:
        change = admin.update_user(args.name, secret, super_user=super_user)
    if secret and not given:
        say(f'new secret key of "{args.name}" (shown once; store it now): {secret}')
    return _report(f'user "{args.name}" updated', change)


def user_delete(args: argparse.Namespace) -> int:
    with admin_client(args) as admin:
        change = admin.delete_user(args.name)
    return _report(f'user "{args.name}" deleted', change)


def user_list(args: argparse.Namespace) -> int:
    with admin_client(args) as admin:
        users = admin.users()
    rows = [(u.name, u.type, "; ".join(map(_policy, u.policies))) for u in users if args.name in (None, u.name)]
    table("users", ["user", "type", "policies"], rows)
    return 0


def _policy(policy: Any) -> str:
    return f"{policy.decision} {','.join(sorted(map(str, policy.actions)))} on {policy.resource}"


def acl_set(args: argparse.Namespace) -> int:
    actions = [a.strip() for a in args.actions.split(",") if a.strip()]
    decision = "Deny" if args.deny else "Allow"
    with admin_client(args) as admin:
        change = admin.set_acl(args.user, args.resource, actions, decision=decision)
    return _report(f'{decision} {",".join(actions)} on {args.resource} for "{args.user}"', change)


def acl_delete(args: argparse.Namespace) -> int:
    with admin_client(args) as admin:
        change = admin.delete_acl(args.user, args.resource)
    return _report(f'policy on {args.resource} of "{args.user}" deleted', change)


def add_commands(cmds: Any) -> None:
    users = cmds.add_parser("user", help="users: create, update, delete, list").add_subparsers(
        dest="user_action", required=True
    )
    p = users.add_parser("create", help="a new user (a random secret is made and shown once unless given)")
    p.add_argument("name", help="the user's access key")
    p.add_argument("--secret-key-stdin", action="store_true", help="read its secret from stdin's first line")
    p.add_argument("--super", action="store_true", help="a super user: may do anything")
    p.set_defaults(func=user_create)
    p = users.add_parser("update", help="a user's secret or type (its policies stay)")
    p.add_argument("name", help="the user's access key")
    secret = p.add_mutually_exclusive_group()
    secret.add_argument("--secret-key-stdin", action="store_true", help="read its new secret from stdin's first line")
    secret.add_argument("--new-secret", action="store_true", help="make a random new secret, shown once")
    kind = p.add_mutually_exclusive_group()
    kind.add_argument("--super", action="store_true", help="make it a super user")
    kind.add_argument("--normal", action="store_true", help="make it a normal user (its policies apply)")
    p.set_defaults(func=user_update)
    p = users.add_parser("delete", help="remove a user")
    p.add_argument("name", help="the user's access key")
    p.set_defaults(func=user_delete)
    p = users.add_parser("list", help="users, their types and policies (never a secret)")
    p.add_argument("name", nargs="?", help="only this user's (default: every user)")
    p.set_defaults(func=user_list)

    acls = cmds.add_parser("acl", help="policies: set, delete, list").add_subparsers(dest="acl_action", required=True)
    p = acls.add_parser("set", help="give a user actions on a resource (replaces its policy there)")
    p.add_argument("user", help="the user's access key")
    p.add_argument("resource", help="Topic:<name>, Topic:<prefix>*, Group:<name>, Group:<prefix>* or Cluster")
    p.add_argument("actions", help="comma-separated: Pub,Sub,Create,Update,Delete,Get,List or All")
    p.add_argument("--deny", action="store_true", help="a Deny policy (a matching Deny wins)")
    p.set_defaults(func=acl_set)
    p = acls.add_parser("delete", help="remove a user's policy on a resource")
    p.add_argument("user", help="the user's access key")
    p.add_argument("resource", help="the resource of the policy to remove")
    p.set_defaults(func=acl_delete)
    p = acls.add_parser("list", help="the policies of every user, or of one")
    p.add_argument("name", nargs="?", help="only this user's (default: every user)")
    p.set_defaults(func=user_list)
