"""RocketMQ's ACL 1.0 request signature, as 4.x clients sign (``AclClientRPCHook``,
``AclUtils``; ali-ons ``channel.js``; ACL 2.0 clients sign the same way with a user's name and
password).

The client adds ``AccessKey`` (and ``SecurityToken`` if it has one) to the request's header
fields, then signs: the values of every header field but ``Signature``, in the order of their
names, concatenated, followed by the body; ``Signature`` is Base64 of HMAC-SHA1 of that, keyed
with the secret key. The server recomputes it with the secret it holds for the access key.

The signature carries no time, so a captured request can be replayed: where the network is not
trusted, turn TLS on (as for any RocketMQ ACL 1.0 deployment).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping
from typing import Any, Final

from rocketspark.errors import AuthenticationError

ACCESS_KEY: Final = "AccessKey"
SIGNATURE: Final = "Signature"
# Java clients from 4.9.3 sign it, while the 4.9 broker leaves it out (apache/rocketmq#5310):
# a signature is accepted with or without it
UNIQUE_KEY_QUERY: Final = "_UNIQUE_KEY_QUERY"


def content(ext: Mapping[str, Any], body: bytes, leave_out: frozenset[str] = frozenset({SIGNATURE})) -> bytes:
    """What is signed: the header values ordered by name (Java's TreeMap order), then the body."""
    return "".join(str(ext[k]) for k in sorted(ext) if k not in leave_out).encode() + body


def signature(secret_key: str, signed: bytes) -> str:
    return base64.b64encode(hmac.new(secret_key.encode(), signed, hashlib.sha1).digest()).decode()


def sign(ext: dict[str, Any], body: bytes, access_key: str, secret_key: str) -> dict[str, Any]:
    """``ext`` with ``AccessKey`` and ``Signature`` added, as a 4.x client sends it."""
    signed = {**ext, ACCESS_KEY: access_key}
    signed[SIGNATURE] = signature(secret_key, content(signed, body))
    return signed


def claimed_access_key(ext: Mapping[str, Any]) -> str:
    """The access key a request claims; AuthenticationError when it is not signed."""
    access_key, sig = ext.get(ACCESS_KEY), ext.get(SIGNATURE)
    if not access_key or not sig:
        raise AuthenticationError(
            "the request is not signed: this server requires credentials (give the RocketMQ client an "
            "AclClientRPCHook with an access key and secret key, or ali-ons accessKeyId and accessKeySecret)"
        )
    return str(access_key)


def verify(ext: Mapping[str, Any], body: bytes, secret_key: str) -> None:
    """Raise AuthenticationError unless the request's ``Signature`` is the one ``secret_key`` gives."""
    claimed = str(ext.get(SIGNATURE, "")).encode()
    if hmac.compare_digest(signature(secret_key, content(ext, body)).encode(), claimed):
        return
    if UNIQUE_KEY_QUERY in ext and hmac.compare_digest(
        signature(secret_key, content(ext, body, frozenset({SIGNATURE, UNIQUE_KEY_QUERY}))).encode(), claimed
    ):
        return
    raise AuthenticationError(
        f'user "{ext.get(ACCESS_KEY)}": the request signature does not match (wrong secret key, or a header field '
        "changed on the way)"
    )
