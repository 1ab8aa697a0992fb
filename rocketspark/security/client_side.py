"""What a client connects with: the user it signs as and the TLS it speaks.

``Producer``, ``Consumer``, ``Admin`` and ``GroupConsumer`` take the keywords of
``SecurityKwargs``; each one not given comes from the environment
(``ROCKETSPARK_ACCESS_KEY``/``ROCKETSPARK_SECRET_KEY``, ``ROCKETSPARK_TLS``,
``ROCKETSPARK_TLS_CA_FILE``, ``ROCKETSPARK_TLS_CERT_FILE``/``ROCKETSPARK_TLS_KEY_FILE``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, TypedDict

from rocketspark.security.signing import ENV_ACCESS_KEY, ENV_SECRET_KEY, Credentials
from rocketspark.security.tls import ENV_CA_FILE, ENV_CERT_FILE, ENV_KEY_FILE, ENV_TLS, ClientTls


class SecurityKwargs(TypedDict, total=False):
    access_key: str | None  # the user requests are signed as (with secret_key)
    secret_key: str | None
    tls: bool | None  # TLS to every server (default: on when a CA file is given)
    tls_ca_file: str | None  # the CA the servers' certificates are signed by (default: the system's)
    tls_cert_file: str | None  # this client's certificate, for servers with mutual TLS
    tls_key_file: str | None


SECURITY_KEYWORDS = frozenset(SecurityKwargs.__annotations__)


@dataclass(frozen=True, slots=True)
class SecurityField:
    """One security setting under its three names: a client's keyword, the Spark option and
    the environment variable a client falls back to."""

    keyword: str
    option: str
    env: str


FIELDS: Final = (
    SecurityField("access_key", "accessKey", ENV_ACCESS_KEY),
    SecurityField("secret_key", "secretKey", ENV_SECRET_KEY),
    SecurityField("tls", "tls", ENV_TLS),
    SecurityField("tls_ca_file", "tlsCaFile", ENV_CA_FILE),
    SecurityField("tls_cert_file", "tlsCertFile", ENV_CERT_FILE),
    SecurityField("tls_key_file", "tlsKeyFile", ENV_KEY_FILE),
)
assert {f.keyword for f in FIELDS} == SECURITY_KEYWORDS


@dataclass(frozen=True, slots=True)
class ClientSecurity:
    credentials: Credentials | None
    tls: ClientTls | None

    @classmethod
    def of(cls, options: SecurityKwargs) -> ClientSecurity:
        return cls(
            Credentials.resolve(options.get("access_key"), options.get("secret_key")),
            ClientTls.resolve(
                options.get("tls"),
                options.get("tls_ca_file"),
                options.get("tls_cert_file"),
                options.get("tls_key_file"),
            ),
        )
