"""The server's check of every request, at its edge (the dispatcher), before any handler.

Authentication first: the request must be signed (``signing``) by the cluster credential,
the configured admin, or a user of the table, within the clock-skew window. Then
authorization by the request code's rule (``rules``): the cluster may do anything; only
the cluster may do what brokers and replicas do among themselves; super users may do
anything else; other users what their policies allow. A refusal is an AuthenticationError
or a NoPermissionError (NO_PERMISSION on the wire) naming the user and what is missing,
never a secret.
"""

from __future__ import annotations

import hmac
import time
from collections import Counter
from typing import Final

from rocketspark.errors import AuthenticationError, NoPermissionError
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.security import rocketmq_acl
from rocketspark.security.acl import User, UserType
from rocketspark.security.rules import CLUSTER, RULES, SIGNED, SUPER
from rocketspark.security.signing import (
    AUTH_HEADER,
    CLUSTER_ACCESS_KEY,
    DATE_HEADER,
    Credentials,
    parse_date_time,
    read_signature,
    verify,
)
from rocketspark.security.store import AclStore

DEFAULT_SKEW_S: Final = 300  # how far a request's time may be from the server's clock
_VERIFIED_MAX: Final = 4096  # signatures verified lately, remembered (one HMAC per user a second)


class Guard:
    def __init__(
        self, store: AclStore, cluster_secret: str, admin: Credentials | None = None, skew_s: float = DEFAULT_SKEW_S
    ) -> None:
        self.store = store
        self.cluster = User(CLUSTER_ACCESS_KEY, cluster_secret, UserType.SUPER)
        self.admin = User(admin.access_key, admin.secret_key, UserType.SUPER) if admin is not None else None
        self.skew_s = skew_s
        # (date-time, authorization) verified lately -> (secret it matched, valid until): a
        # client signs once a second, so most requests repeat a pair already checked
        self._verified: dict[tuple[object, object], tuple[str, float]] = {}
        self.refusals: Counter[str] = Counter()  # "authentication" | "permission": for the metrics

    def authenticate(self, request: RemotingCommand) -> str:
        """Who signed the request; AuthenticationError when nobody known did. Runs before the
        request's shape is checked."""
        try:
            return self._authenticate(request)
        except AuthenticationError:
            self.refusals["authentication"] += 1
            raise

    def claimant(self, request: RemotingCommand) -> str:
        """Who a RocketMQ client's request (ACL 1.0) says signed it: a known user, checked from
        the header alone; its signature covers the body, checked by ``verify_body_signature``."""
        try:
            return self._user(rocketmq_acl.claimed_access_key(request.ext)).name
        except AuthenticationError:
            self.refusals["authentication"] += 1
            raise

    def verify_body_signature(self, request: RemotingCommand, name: str) -> None:
        try:
            rocketmq_acl.verify(request.ext, request.body, self._user(name).secret)
        except AuthenticationError:
            self.refusals["authentication"] += 1
            raise

    def authorize(self, request: RemotingCommand, name: str) -> None:
        """Raise NoPermissionError unless user ``name`` (authenticated) may make ``request``."""
        try:
            self._authorize(request, name)
        except NoPermissionError:
            self.refusals["permission"] += 1
            raise

    def user_by_secret(self, access_key: str, secret_key: str) -> User:
        """The user whose access key and secret key these are (HTTP basic auth, e.g. of
        ``/metrics``), compared in constant time; AuthenticationError otherwise, saying
        neither which part was wrong nor anything of the secret."""
        try:
            user = self._user(access_key)
        except AuthenticationError:
            user = None
        expected = user.secret if user is not None else secret_key + "?"  # the same work for a stranger
        if not hmac.compare_digest(secret_key.encode(), expected.encode()) or user is None:
            raise AuthenticationError(f'unknown access key "{access_key}" or wrong secret key')
        return user

    def _authenticate(self, request: RemotingCommand) -> str:
        date, auth = request.ext.get(DATE_HEADER), request.ext.get(AUTH_HEADER)
        claim = read_signature(date, auth)
        user = self._user(claim.access_key)
        now = time.time()
        known = self._verified.get((date, auth))
        if known is None or known[0] != user.secret or now > known[1]:
            verify(claim, user.secret, now, self.skew_s)
            if len(self._verified) >= _VERIFIED_MAX:
                self._verified.clear()
            self._verified[(date, auth)] = (user.secret, parse_date_time(claim.date_time) + self.skew_s)
        return user.name

    def _authorize(self, request: RemotingCommand, name: str) -> None:
        user = self._user(name)
        rule = RULES[request.code]
        if user is self.cluster:
            return
        if rule.kind == CLUSTER:
            raise NoPermissionError(
                f'user "{user.name}" may not send {_name(request.code)}: only the cluster\'s own servers do, signed '
                "with the cluster credential (cluster_secret)"
            )
        if user.type is UserType.SUPER or rule.kind == SIGNED:
            return
        if rule.kind == SUPER:
            raise NoPermissionError(
                f'user "{user.name}" is not a super user: only super users read or change users and policies'
            )
        for need in rule.needs(request):
            if not user.allows(need):
                raise NoPermissionError(f'user "{user.name}" lacks {need}')

    def _user(self, access_key: str) -> User:
        if access_key == CLUSTER_ACCESS_KEY:
            return self.cluster
        if self.admin is not None and access_key == self.admin.name:
            return self.admin
        user = self.store.table.users.get(access_key)
        if user is None:
            raise AuthenticationError(f'unknown access key "{access_key}": no such user on this server')
        return user


def _name(code: int) -> str:
    try:
        return f"{RequestCode(code).name} ({code})"
    except ValueError:
        return f"request {code}"
