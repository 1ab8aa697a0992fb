"""Credentials and the request signature of the official RocketMQ 5 clients.

Every request carries the time it was made, ``x-mq-date-time`` (``yyyyMMdd'T'HHmmss'Z'``,
UTC), and ``authorization: MQv2-HMAC-SHA1 Credential=<access key>, SignedHeaders=x-mq-date-time,
Signature=<hex>``, the signature being HMAC-SHA1 of the date-time string keyed with the secret
key. The gRPC v2 clients put both in their call metadata; our own requests carry them in the
command's ``ext``. A server recomputes the signature with the secret it holds for the access
key and refuses a time outside its clock-skew window.

The signature proves who sent a request, not what it says: on a network that is not trusted,
TLS protects the content (and stops a signed request from being replayed within the window).
"""

from __future__ import annotations

import calendar
import hashlib
import hmac
import os
import time
from dataclasses import dataclass, field
from typing import Final

from rocketspark.errors import AuthenticationError, ConfigError
from rocketspark.security.acl import RESERVED_NAME

ALGORITHM: Final = "MQv2-HMAC-SHA1"
DATE_HEADER: Final = "x-mq-date-time"
AUTH_HEADER: Final = "authorization"
DATE_FORMAT: Final = "%Y%m%dT%H%M%SZ"
ENV_ACCESS_KEY: Final = "ROCKETSPARK_ACCESS_KEY"
ENV_SECRET_KEY: Final = "ROCKETSPARK_SECRET_KEY"
CLUSTER_ACCESS_KEY: Final = RESERVED_NAME  # the servers' own identity (the cluster credential)


def signature(secret_key: str, date_time: str) -> str:
    return hmac.new(secret_key.encode(), date_time.encode(), hashlib.sha1).hexdigest()


def date_time(at: float) -> str:
    return time.strftime(DATE_FORMAT, time.gmtime(at))


def parse_date_time(value: str) -> float:
    """Seconds since the epoch of an ``x-mq-date-time`` value; ValueError if malformed."""
    return float(calendar.timegm(time.strptime(value, DATE_FORMAT)))


@dataclass(frozen=True, slots=True)
class Credentials:
    """An access key and its secret. The secret never shows in a repr, a log line or an error."""

    access_key: str
    secret_key: str = field(repr=False)

    def __post_init__(self) -> None:
        if not self.access_key or not self.secret_key:
            raise ConfigError("credentials need both an access key and a secret key")
        if any(c in self.access_key for c in ", =/") or not self.access_key.isprintable():
            raise ConfigError(
                f'access key "{self.access_key}" may not contain spaces, commas, "=" or "/" (they delimit '
                "the signature header)"
            )

    @classmethod
    def resolve(cls, access_key: str | None, secret_key: str | None) -> Credentials | None:
        """The credentials given, else those in ROCKETSPARK_ACCESS_KEY / ROCKETSPARK_SECRET_KEY,
        else none (anonymous: refused by a server with security on)."""
        if access_key is None and secret_key is None:
            access_key, secret_key = os.environ.get(ENV_ACCESS_KEY), os.environ.get(ENV_SECRET_KEY)
            if access_key is None and secret_key is None:
                return None
            where = f"the environment ({ENV_ACCESS_KEY}, {ENV_SECRET_KEY})"
        else:
            where = "access_key and secret_key"
        if not access_key or not secret_key:
            raise ConfigError(f"{where}: set both the access key and the secret key, or neither")
        return cls(access_key, secret_key)

    def headers(self, at: float | None = None) -> dict[str, str]:
        """The two signature fields for a request made at ``at`` (now by default)."""
        stamp = date_time(time.time() if at is None else at)
        return {
            DATE_HEADER: stamp,
            AUTH_HEADER: f"{ALGORITHM} Credential={self.access_key}, SignedHeaders={DATE_HEADER}, "
            f"Signature={signature(self.secret_key, stamp)}",
        }


class Signer:
    """Signs requests with one set of credentials; the signature changes once a second (the
    date-time's resolution), so it is computed once a second, not per request."""

    def __init__(self, credentials: Credentials) -> None:
        self.credentials = credentials
        self._second = -1
        self._headers: dict[str, str] = {}

    def headers(self) -> dict[str, str]:
        now = time.time()
        second = int(now)
        if second != self._second:  # a benign race: two threads may both compute the same value
            self._headers, self._second = self.credentials.headers(now), second
        return self._headers

    def __repr__(self) -> str:
        return f"Signer({self.credentials!r})"


@dataclass(frozen=True, slots=True)
class SignedRequest:
    """What a request claims: who sent it, when, and the signature to check."""

    access_key: str
    date_time: str
    signature: str


def read_signature(date_value: object, auth_value: object) -> SignedRequest:
    """The claim of a request's two signature fields; AuthenticationError when missing or
    malformed. Accepts what the official clients of every language send: a credential of
    ``<ak>`` or ``<ak>//<suffix>``, hex in either case."""
    if auth_value is None or date_value is None:
        raise AuthenticationError(
            "the request is not signed: this server requires credentials (give the client an access key "
            f"and a secret key, or set {ENV_ACCESS_KEY} and {ENV_SECRET_KEY})"
        )
    if not isinstance(auth_value, str) or not isinstance(date_value, str):
        raise AuthenticationError("the request's signature fields are not strings")
    algorithm, _, rest = auth_value.strip().partition(" ")
    if algorithm != ALGORITHM:
        raise AuthenticationError(f'the request is signed with "{algorithm}"; this server checks {ALGORITHM}')
    parts = dict(p.strip().partition("=")[::2] for p in rest.split(","))
    access_key = parts.get("Credential", "").split("/", 1)[0]
    sig = parts.get("Signature", "")
    if not access_key or not sig:
        raise AuthenticationError("the request's authorization field names no credential or no signature")
    return SignedRequest(access_key, date_value, sig.lower())


def verify(claim: SignedRequest, secret_key: str, now: float, skew_s: float) -> None:
    """Raise AuthenticationError unless ``claim`` was signed with ``secret_key`` within
    ``skew_s`` seconds of ``now``."""
    try:
        sent = parse_date_time(claim.date_time)
    except ValueError:
        raise AuthenticationError(f'the request time "{claim.date_time}" is not yyyyMMddTHHmmssZ (UTC)') from None
    if abs(now - sent) > skew_s:
        raise AuthenticationError(
            f'user "{claim.access_key}": the request was signed at {claim.date_time}, {now - sent:+.0f} s from '
            f"this server's clock, outside the allowed skew of {skew_s:g} s; synchronise the clocks (NTP)"
        )
    if not hmac.compare_digest(signature(secret_key, claim.date_time), claim.signature):
        raise AuthenticationError(f'user "{claim.access_key}": the signature does not match (wrong secret key?)')
