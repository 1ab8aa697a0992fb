"""Changing users and policies on every server of a cluster (``Admin.create_user`` and kin).

Each server keeps its own copy of the table (``rocketspark.security.store``). A change reads
the table from every server that answers, takes the newest, applies the change to it and
offers the result, one version on, to every broker, replica and nameserver. A server that
was down, or refused the change, is named in ``AclChange.missed``; it catches up when it, or
a broker, next registers (``rocketspark.security.service.reconcile``), a slave through its
master's metadata. Two admins changing the table at the same moment: the
later change can undo the earlier one, and servers can even be left holding two different
tables of the same version, which the next change (one version on) replaces; run such
changes one at a time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rocketspark.errors import ConnectError, RequestTimeoutError, RocketSparkError
from rocketspark.protocol.bodies import pack, unpack
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.security.acl import AclTable, Policy, UserType

if TYPE_CHECKING:
    from rocketspark.client.admin import Admin


@dataclass(frozen=True, slots=True)
class UserInfo:
    """A user as ``Admin.users()`` shows it: never its secret."""

    name: str
    type: str
    policies: tuple[Policy, ...]


@dataclass(frozen=True, slots=True)
class AclChange:
    version: int  # the table's version now
    applied: list[str]  # servers that hold it
    missed: dict[str, str]  # servers that did not take it (unreachable, or refused): why


def servers(admin: Admin) -> list[str]:
    """Every nameserver, and every broker replica the nameserver knows."""
    found = list(admin.nameservers)
    for entry in admin.cluster_list()["brokers"].values():
        for address in (entry.get("addr"), *entry.get("replicas", ())):
            if address and address not in found:
                found.append(address)
    return found


def newest(admin: Admin) -> tuple[AclTable, list[str], dict[str, str]]:
    """The newest table any server holds, the servers asked, and those that did not answer.
    A server that refuses (this admin lacks the right there) stops everything: nothing is
    changed yet."""
    tables, missed = [], {}
    addresses = servers(admin)
    for address in addresses:
        try:
            response = admin.call(address, RemotingCommand.request(RequestCode.AUTH_GET_TABLE))
        except (ConnectError, RequestTimeoutError) as exc:
            missed[address] = exc.message
            continue
        tables.append(AclTable.from_wire(unpack(response.body)))
    if not tables:
        raise ConnectError(f"no server of the cluster answered ({', '.join(addresses)}): nothing was changed")
    return max(tables, key=lambda t: t.version), addresses, missed


def change(admin: Admin, edit: Callable[[AclTable], AclTable]) -> AclChange:
    table, addresses, missed = newest(admin)
    changed = edit(table)
    body = pack(changed.to_wire())
    applied = []
    for address in addresses:
        if address in missed:
            continue
        try:
            response = admin.call(address, RemotingCommand.request(RequestCode.AUTH_PUT_TABLE, body=body))
        except RocketSparkError as exc:  # the others still get it: say which did not, and why
            missed[address] = exc.message
            continue
        if response.ext.get("adopted") is False:  # another change reached it first, at the same version or later
            missed[address] = (
                f"it holds user table version {response.ext.get('version')} already (another change at the same "
                "time?): check with users() and make this change again"
            )
        else:
            applied.append(address)
    return AclChange(changed.version, applied, missed)


def users(admin: Admin) -> list[UserInfo]:
    table, _, _ = newest(admin)
    return [UserInfo(u.name, u.type.value, u.policies) for u in table.users.values()]


def user_type(super_user: bool) -> UserType:
    return UserType.SUPER if super_user else UserType.NORMAL
