"""Users and policies, and the decision for one request (RocketMQ's ACL 2.0, simplified).

A user has an access key (its name), a secret key and a type: ``Super`` users may do
anything but what only the cluster itself does; ``Normal`` users may do what their policies
allow. A policy gives a user ``actions`` on a ``resource`` with a ``decision``:

- resources: ``Topic:<name>``, ``Topic:<prefix>*``, ``Group:<name>``, ``Group:<prefix>*``
  (``*`` alone: every one) and ``Cluster``;
- actions: Pub, Sub, Create, Update, Delete, Get, List, or All;
- decision: Allow or Deny. A Deny that matches wins over any Allow; nothing matching is a
  Deny (deny by default).

The table travels whole (``to_wire``/``from_wire``) between servers with a version: a server
keeps the newest it has seen.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final

from rocketspark.errors import InvalidParameterError


class Action(StrEnum):
    PUB = "Pub"
    SUB = "Sub"
    CREATE = "Create"
    UPDATE = "Update"
    DELETE = "Delete"
    GET = "Get"
    LIST = "List"
    ALL = "All"


class Decision(StrEnum):
    ALLOW = "Allow"
    DENY = "Deny"


class UserType(StrEnum):
    SUPER = "Super"
    NORMAL = "Normal"


CLUSTER: Final = "Cluster"
_RESOURCE = re.compile(r"^(?:Cluster|(?:Topic|Group):(?:\*|[A-Za-z0-9%|_.\-]{1,255}\*?))$")
_NAME = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")


def check_resource(resource: str) -> str:
    if not _RESOURCE.match(resource):
        raise InvalidParameterError(
            f'"{resource}" is not a resource: use Topic:<name>, Topic:<prefix>*, Group:<name>, Group:<prefix>* '
            "(* alone for every one) or Cluster"
        )
    return resource


RESERVED_NAME: Final = "rocketspark-cluster"  # the servers' own identity (signing.CLUSTER_ACCESS_KEY)


def check_user_name(name: str) -> str:
    if not _NAME.match(name):
        raise InvalidParameterError(f'user name "{name}" must be 1-64 letters, digits, "_", "." or "-"')
    if name == RESERVED_NAME:
        raise InvalidParameterError(f'"{name}" is the cluster\'s own identity; choose another user name')
    return name


def parse_actions(actions: list[str]) -> frozenset[Action]:
    try:
        parsed = frozenset(Action(a) for a in actions)
    except ValueError:
        known = ", ".join(a.value for a in Action)
        raise InvalidParameterError(f"actions {actions} must each be one of {known}") from None
    if not parsed:
        raise InvalidParameterError(f"a policy needs at least one action ({', '.join(a.value for a in Action)})")
    return parsed


@dataclass(frozen=True, slots=True)
class Policy:
    resource: str
    actions: frozenset[Action]
    decision: Decision

    def to_wire(self) -> list[Any]:
        return [self.resource, [str(a) for a in sorted(self.actions)], str(self.decision)]

    def covers(self, resource: str, action: Action) -> bool:
        if Action.ALL not in self.actions and action not in self.actions:
            return False
        if self.resource.endswith("*"):  # a prefix ("Topic:*" is every topic)
            return resource.startswith(self.resource[:-1])
        return self.resource == resource


@dataclass(frozen=True, slots=True)
class Need:
    """A request needs one of ``actions`` on ``resource``."""

    resource: str
    actions: frozenset[Action]

    def __str__(self) -> str:
        return f"{' or '.join(sorted(a.value for a in self.actions))} on {self.resource}"


@dataclass(frozen=True, slots=True)
class User:
    name: str
    secret: str = field(repr=False)
    type: UserType = UserType.NORMAL
    policies: tuple[Policy, ...] = ()

    def allows(self, need: Need) -> bool:
        """Whether this user may do ``need``: a super user always; else a matching Allow and
        no matching Deny, for one of its actions."""
        if self.type is UserType.SUPER:
            return True
        for action in need.actions:
            matching = [p.decision for p in self.policies if p.covers(need.resource, action)]
            if matching and Decision.DENY not in matching:
                return True
        return False


@dataclass(frozen=True, slots=True)
class AclTable:
    """Every user, by name, and the version of this table (newer wins between servers)."""

    users: dict[str, User] = field(default_factory=dict)
    version: int = 0

    def to_wire(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "users": [
                {
                    "name": u.name,
                    "secret": u.secret,
                    "type": u.type.value,
                    "policies": [p.to_wire() for p in u.policies],
                }
                for u in self.users.values()
            ],
        }

    @classmethod
    def from_wire(cls, wire: dict[str, Any]) -> AclTable:
        """The table from its wire form; InvalidParameterError naming what is wrong."""
        try:
            users = {}
            for u in wire["users"]:
                policies = tuple(
                    Policy(check_resource(r), parse_actions(list(a)), Decision(d)) for r, a, d in u["policies"]
                )
                name = check_user_name(str(u["name"]))
                users[name] = User(name, str(u["secret"]), UserType(u["type"]), policies)
            return cls(users, int(wire["version"]))
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, InvalidParameterError):
                raise
            raise InvalidParameterError(f"not a user table: {type(exc).__name__}: {exc}") from None

    # -- changes: each returns a new table one version on -----------------------------------------

    def with_user(self, name: str, secret: str, user_type: UserType = UserType.NORMAL) -> AclTable:
        old = self.users.get(check_user_name(name))
        policies = old.policies if old is not None else ()
        return self._changed({**self.users, name: User(name, secret, user_type, policies)})

    def without_user(self, name: str) -> AclTable:
        if name not in self.users:
            raise InvalidParameterError(f'there is no user "{name}"')
        return self._changed({n: u for n, u in self.users.items() if n != name})

    def with_policy(self, name: str, resource: str, actions: list[str], decision: Decision) -> AclTable:
        """``name``'s policy on ``resource`` set to ``actions``/``decision`` (replacing one there)."""
        user = self._user(name)
        policy = Policy(check_resource(resource), parse_actions(actions), decision)
        kept = tuple(p for p in user.policies if p.resource != resource)
        return self._changed({**self.users, name: User(user.name, user.secret, user.type, (*kept, policy))})

    def without_policy(self, name: str, resource: str) -> AclTable:
        user = self._user(name)
        kept = tuple(p for p in user.policies if p.resource != resource)
        if len(kept) == len(user.policies):
            raise InvalidParameterError(f'user "{name}" has no policy on {resource}')
        return self._changed({**self.users, name: User(user.name, user.secret, user.type, kept)})

    def _user(self, name: str) -> User:
        user = self.users.get(name)
        if user is None:
            raise InvalidParameterError(f'there is no user "{name}": create it first (rocketspark admin user create)')
        return user

    def _changed(self, users: dict[str, User]) -> AclTable:
        return AclTable(users, self.version + 1)
