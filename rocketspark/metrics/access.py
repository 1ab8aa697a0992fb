"""Who may scrape ``/metrics``: the two schemes Prometheus's scrape configuration speaks.

- ``bearer``: ``Authorization: Bearer <metrics_token>`` (Prometheus: ``authorization:
  {credentials_file: ...}``), one token per cluster, compared in constant time;
- ``basic``: HTTP basic auth with a cluster user's access key and secret key (Prometheus:
  ``basic_auth: {username: ..., password_file: ...}``); the user must be allowed Get or List
  on ``Cluster`` (a super user is), so a scraper gets a read-only user of its own, managed and
  revoked like any other (``rocketspark admin user``/``acl``).

A request without the right credentials is answered 401 with a ``WWW-Authenticate`` challenge
and one line saying what to send; a known user without the permission gets 403 naming it.
The metrics name every topic and group, so with ``auth_enable`` they are protected by default
(``SecuritySettings.scrape_access``).
"""

from __future__ import annotations

import base64
import binascii
import hmac
from dataclasses import dataclass
from typing import Protocol

from rocketspark.errors import AuthenticationError
from rocketspark.security.acl import CLUSTER, Action, Need
from rocketspark.security.request_guard import Guard

REALM = "rocketspark metrics"
SCRAPE_NEED = Need(CLUSTER, frozenset({Action.GET, Action.LIST}))


@dataclass(frozen=True, slots=True)
class Refusal:
    """How a scrape is refused: its HTTP status, challenge, one-line body, and the reason it is
    counted under (``credentials``: none or wrong; ``permission``: a user without the right)."""

    status: int
    challenge: str  # the WWW-Authenticate value ("" for a 403)
    body: str
    reason: str


class ScrapeAccess(Protocol):
    """Decides on a scrape from its ``Authorization`` header (None: there was none)."""

    scheme: str  # "bearer" | "basic"

    def check(self, authorization: str | None) -> Refusal | None: ...


def _credentials(authorization: str | None, scheme: str) -> str | None:
    """The credentials of an ``Authorization`` header of ``scheme`` (case-insensitive), or None."""
    name, _, value = (authorization or "").strip().partition(" ")
    if name.lower() != scheme.lower():
        return None
    return value.strip() or None


class BearerToken:
    """Scrapes must send ``Authorization: Bearer <token>``."""

    scheme = "bearer"

    def __init__(self, token: str) -> None:
        self._token = token.encode()

    def check(self, authorization: str | None) -> Refusal | None:
        sent = _credentials(authorization, "Bearer")
        if sent is None:
            return Refusal(
                401,
                f'Bearer realm="{REALM}"',
                "send this server's metrics_token as 'Authorization: Bearer <token>' (Prometheus: authorization: "
                "{credentials_file: <a file holding the token>})",
                "credentials",
            )
        if not hmac.compare_digest(sent.encode(), self._token):
            return Refusal(
                401,
                f'Bearer realm="{REALM}", error="invalid_token"',
                "wrong metrics token: send this server's metrics_token as 'Authorization: Bearer <token>'",
                "credentials",
            )
        return None


class ClusterUsers:
    """Scrapes must send a cluster user's access key and secret key with HTTP basic auth; the
    user needs Get or List on Cluster."""

    scheme = "basic"

    def __init__(self, guard: Guard) -> None:
        self.guard = guard

    def check(self, authorization: str | None) -> Refusal | None:
        challenge = f'Basic realm="{REALM}", charset="UTF-8"'
        how = (
            "send a cluster user's access key and secret key with HTTP basic auth (Prometheus: basic_auth: "
            "{username: <access key>, password_file: <a file holding the secret key>}); the user needs Get or "
            "List on Cluster"
        )
        pair = _basic_pair(_credentials(authorization, "Basic"))
        if pair is None:
            return Refusal(401, challenge, how, "credentials")
        try:
            user = self.guard.user_by_secret(*pair)
        except AuthenticationError as exc:
            return Refusal(401, challenge, f"{exc.message}: {how}", "credentials")
        if not user.allows(SCRAPE_NEED):
            return Refusal(
                403,
                "",
                f'user "{user.name}" lacks {SCRAPE_NEED}: grant it with rocketspark admin acl set {user.name} '
                f"{CLUSTER} Get",
                "permission",
            )
        return None


def _basic_pair(credentials: str | None) -> tuple[str, str] | None:
    """``(access key, secret key)`` of basic-auth credentials (base64 of ``key:secret``, UTF-8)."""
    if credentials is None:
        return None
    try:
        decoded = base64.b64decode(credentials, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None
    access_key, colon, secret_key = decoded.partition(":")
    return (access_key, secret_key) if colon and access_key else None
