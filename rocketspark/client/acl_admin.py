"""Users and policies, changed on every server of a cluster (``Acl``; ``Admin.create_user`` and kin).

Each server keeps its own copy of the table (``rocketspark.security.store``). A change reads
the table from every server that answers, takes the newest, applies the change to it and
offers the result, one version on, to every broker, replica and nameserver. A server that
was down, or refused the change, is named in ``AclChange.missed``; it catches up when it, or
a broker, next registers (``rocketspark.security.service.reconcile``), a slave through its
master's metadata. Two admins changing the table at the same moment: the
later change can undo the earlier one, and servers can even be left holding two different
tables of the same version, which the next change (one version on) replaces; run such
changes one at a time. On its own::

    from rocketspark.client.acl_admin import Acl
    from rocketspark.client.admin_core import AdminConnection

    with AdminConnection("127.0.0.1:9876", access_key="admin", secret_key="...") as connection:
        acl = Acl(connection)
        acl.create_user("etl", "s3cret")
        acl.set_acl("etl", "Topic:orders", ["Pub", "Sub"])
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rocketspark.client.admin_core import AdminCore
from rocketspark.errors import ConnectError, InvalidParameterError, RequestTimeoutError, RocketSparkError
from rocketspark.protocol.bodies import pack, unpack
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.security.acl import AclTable, Decision, Policy, UserType
from rocketspark.security.signing import Credentials


@dataclass(frozen=True, slots=True)
class UserInfo:
    """A user as ``Acl.users()`` shows it: never its secret."""

    name: str
    type: str
    policies: tuple[Policy, ...]


@dataclass(frozen=True, slots=True)
class AclChange:
    version: int  # the table's version now
    applied: list[str]  # servers that hold it
    missed: dict[str, str]  # servers that did not take it (unreachable, or refused): why


def servers(core: AdminCore) -> list[str]:
    """Every nameserver, and every broker replica the nameserver knows."""
    found = list(core.nameservers)
    for entry in core.cluster_list()["brokers"].values():
        for address in (entry.get("addr"), *entry.get("replicas", ())):
            if address and address not in found:
                found.append(address)
    return found


def newest(core: AdminCore) -> tuple[AclTable, list[str], dict[str, str]]:
    """The newest table any server holds, the servers asked, and those that did not answer.
    A server that refuses (this admin lacks the right there) stops everything: nothing is
    changed yet."""
    tables, missed = [], {}
    addresses = servers(core)
    for address in addresses:
        try:
            response = core.call(address, RemotingCommand.request(RequestCode.AUTH_GET_TABLE))
        except (ConnectError, RequestTimeoutError) as exc:
            missed[address] = exc.message
            continue
        tables.append(AclTable.from_wire(unpack(response.body)))
    if not tables:
        raise ConnectError(f"no server of the cluster answered ({', '.join(addresses)}): nothing was changed")
    return max(tables, key=lambda t: t.version), addresses, missed


def change(core: AdminCore, edit: Callable[[AclTable], AclTable]) -> AclChange:
    table, addresses, missed = newest(core)
    changed = edit(table)
    body = pack(changed.to_wire())
    applied = []
    for address in addresses:
        if address in missed:
            continue
        try:
            response = core.call(address, RemotingCommand.request(RequestCode.AUTH_PUT_TABLE, body=body))
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


def user_type(super_user: bool) -> UserType:
    return UserType.SUPER if super_user else UserType.NORMAL


class Acl:
    """The cluster's users and their policies."""

    def __init__(self, core: AdminCore) -> None:
        self.core = core

    def users(self) -> list[UserInfo]:
        """Every user with its type and policies (never a secret)."""
        table, _, _ = newest(self.core)
        return [UserInfo(u.name, u.type.value, u.policies) for u in table.users.values()]

    def create_user(self, name: str, secret: str, *, super_user: bool = False) -> AclChange:
        """A new user signing as ``name`` with ``secret``; a super user may do anything."""

        def edit(table: AclTable) -> AclTable:
            if name in table.users:
                raise InvalidParameterError(f'user "{name}" exists already: use update_user to change it')
            return table.with_user(name, Credentials(name, secret).secret_key, user_type(super_user))

        return change(self.core, edit)

    def update_user(self, name: str, secret: str | None = None, *, super_user: bool | None = None) -> AclChange:
        """A new secret, or type, for an existing user (its policies stay)."""

        def edit(table: AclTable) -> AclTable:
            old = table.users.get(name)
            if old is None:
                raise InvalidParameterError(f'there is no user "{name}": create it first')
            kind = old.type if super_user is None else user_type(super_user)
            return table.with_user(name, secret or old.secret, kind)

        return change(self.core, edit)

    def delete_user(self, name: str) -> AclChange:
        return change(self.core, lambda table: table.without_user(name))

    def set_acl(self, user: str, resource: str, actions: list[str], *, decision: str = Decision.ALLOW) -> AclChange:
        """Give ``user`` ``actions`` on ``resource`` (Topic:<name or prefix*>, Group:<name or
        prefix*>, Cluster), allowed or denied; replaces the user's policy on that resource."""
        try:
            verdict = Decision(decision)
        except ValueError:
            raise InvalidParameterError(f'decision "{decision}" must be Allow or Deny') from None
        return change(self.core, lambda table: table.with_policy(user, resource, actions, verdict))

    def delete_acl(self, user: str, resource: str) -> AclChange:
        return change(self.core, lambda table: table.without_policy(user, resource))
