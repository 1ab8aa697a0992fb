"""The security keys every server's configuration has (brokers and nameservers alike).

``auth_enable`` is the one switch: on, every request must be signed and is authorized
(:mod:`rocketspark.security.request_guard`), and the servers sign what they send each other with
the cluster credential (``cluster_secret``, the same on every server of the cluster). The
configured admin is a super user that no table change can remove: the way in on day one.
``tls_enable`` puts every port of the server behind TLS (:mod:`rocketspark.security.tls`).
``metrics_auth`` says who may scrape ``/metrics`` (:mod:`rocketspark.metrics.access`): by
default a bearer token when ``metrics_token`` is set, else with ``auth_enable`` a cluster user
with Get or List on Cluster (basic auth), else anyone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from rocketspark.errors import ConfigError
from rocketspark.hosts import is_loopback
from rocketspark.metrics.access import BearerToken, ClusterUsers, ScrapeAccess
from rocketspark.security.request_guard import DEFAULT_SKEW_S, Guard
from rocketspark.security.signing import CLUSTER_ACCESS_KEY, Credentials
from rocketspark.security.store import AclStore
from rocketspark.security.tls import ClientTls, ServerTls

MIN_SECRET: Final = 16
METRICS_AUTH: Final = ("none", "bearer", "basic")


@dataclass(frozen=True, slots=True)
class PeerSecurity:
    """How a server deals with the other servers of its cluster, read once at start: the
    cluster credential it signs with, the TLS it calls them with and the TLS it listens with."""

    credentials: Credentials | None
    client_tls: ClientTls | None
    server_tls: ServerTls | None


@dataclass(frozen=True, slots=True, kw_only=True)
class SecuritySettings:
    auth_enable: bool = False  # the one switch: authentication and authorization on every request
    # the servers' shared secret, the same on every server (at least 16 characters); they sign what they send each
    # other with it
    cluster_secret: str = field(default="", repr=False)
    admin_access_key: str = ""  # a super user from the configuration (the first way in)
    admin_secret_key: str = field(default="", repr=False)  # that super user's secret
    auth_clock_skew_s: int = DEFAULT_SKEW_S  # a signed request's time may be this far from the server's
    # users and policies (mode 0600); "": <data_dir>/config/acl.json on a broker, next to controller_data_dir on a
    # nameserver
    acl_file: str = ""
    tls_enable: bool = False  # TLS on every port of this server (the whole cluster alike)
    tls_cert_file: str = ""  # this server's certificate chain (PEM); also shown to peers under mutual TLS
    tls_key_file: str = ""  # its private key (PEM; chmod 600)
    tls_ca_file: str = ""  # the CA that signs the cluster's certificates: peers are checked against it
    tls_mutual: bool = False  # mutual TLS: clients must show a certificate signed by tls_ca_file
    # who may scrape /metrics: "none", "bearer" (Authorization: Bearer <metrics_token>) or "basic" (a cluster user
    # allowed Get or List on Cluster); "": bearer if metrics_token is set, else basic with auth_enable, else none
    metrics_auth: str = ""
    metrics_token: str = field(default="", repr=False)  # the bearer token scrapers send (at least 16 characters)

    def check_security(self, listen_host: str) -> None:
        if self.auth_clock_skew_s <= 0:
            raise ConfigError(f"auth_clock_skew_s {self.auth_clock_skew_s} must be positive")
        if bool(self.admin_access_key) != bool(self.admin_secret_key):
            raise ConfigError("admin_access_key and admin_secret_key: set both, or neither")
        if self.admin_access_key:
            Credentials(self.admin_access_key, self.admin_secret_key)  # the same rules as any access key
            if self.admin_access_key == CLUSTER_ACCESS_KEY:
                raise ConfigError(
                    f'admin_access_key "{CLUSTER_ACCESS_KEY}" is the cluster\'s own identity: choose another'
                )
        if self.tls_enable:
            self.server_tls()  # the files are read now: a wrong path stops the start, not a handshake
        elif self.tls_mutual:
            raise ConfigError("tls_mutual needs tls_enable")
        if (self.auth_enable or self.cluster_secret) and len(self.cluster_secret) < MIN_SECRET:
            raise ConfigError(
                f"{'auth_enable needs ' if self.auth_enable else ''}cluster_secret: the same secret of at least "
                f"{MIN_SECRET} characters on every broker and nameserver of the cluster (e.g. python -c 'import "
                "secrets; print(secrets.token_hex(24))')"
            )
        self._check_metrics_auth()
        if self.auth_enable and not self.tls_enable and not is_loopback(listen_host):
            raise ConfigError(
                f"auth_enable on listen_host {listen_host} needs tls_enable: without TLS the user table (with every "
                "user's secret) and the signed requests cross the network in the clear, and a signed request can be "
                "replayed (only a server on 127.0.0.1 may run security without TLS)"
            )

    @property
    def metrics_scheme(self) -> str:
        """How ``/metrics`` is protected: ``metrics_auth``, or what "" resolves to."""
        if self.metrics_auth:
            return self.metrics_auth
        if self.metrics_token:
            return "bearer"
        return "basic" if self.auth_enable else "none"

    def _check_metrics_auth(self) -> None:
        if self.metrics_auth not in ("", *METRICS_AUTH):
            raise ConfigError(
                f'metrics_auth must be "none", "bearer", "basic" or "" (bearer with a metrics_token, else basic with '
                f'auth_enable, else none), not "{self.metrics_auth}"'
            )
        scheme = self.metrics_scheme
        if scheme == "bearer" and len(self.metrics_token) < MIN_SECRET:
            raise ConfigError(
                f'metrics_auth "bearer" needs metrics_token: the token scrapers send, at least {MIN_SECRET} characters '
                "(e.g. python -c 'import secrets; print(secrets.token_urlsafe(24))')"
            )
        if scheme != "bearer" and self.metrics_token:
            raise ConfigError(
                f'metrics_token is set but metrics_auth is "{scheme}", which does not use it: set metrics_auth = '
                '"bearer" (or "", which then means bearer), or remove metrics_token'
            )
        if scheme == "basic" and not self.auth_enable:
            raise ConfigError(
                'metrics_auth "basic" checks the cluster\'s users, which needs auth_enable; without it, use "bearer" '
                "with a metrics_token"
            )

    def scrape_access(self, store: AclStore) -> ScrapeAccess | None:
        """Who may scrape ``/metrics`` (None: anyone), checking users against ``store``."""
        scheme = self.metrics_scheme
        if scheme == "bearer":
            return BearerToken(self.metrics_token)
        if scheme == "basic":
            guard = self.guard(store)
            assert guard is not None  # basic needs auth_enable (checked at start)
            return ClusterUsers(guard)
        return None

    def cluster_credentials(self) -> Credentials | None:
        """What this server signs its requests to other servers with (None: security off)."""
        return Credentials(CLUSTER_ACCESS_KEY, self.cluster_secret) if self.auth_enable else None

    def server_tls(self) -> ServerTls | None:
        """What this server listens with (None: plaintext)."""
        if not self.tls_enable:
            return None
        return ServerTls.of_files(self.tls_cert_file, self.tls_key_file, self.tls_ca_file, self.tls_mutual)

    def peer_security(self) -> PeerSecurity:
        """Read once per server: it calls its peers trusting the cluster's CA and showing its
        own certificate, and signs with the cluster credential."""
        tls = self.server_tls()
        return PeerSecurity(self.cluster_credentials(), tls.as_client() if tls is not None else None, tls)

    def acl_store(self, default: Path) -> AclStore:
        return AclStore(Path(self.acl_file) if self.acl_file else default).load()

    def guard(self, store: AclStore) -> Guard | None:
        if not self.auth_enable:
            return None
        admin = Credentials(self.admin_access_key, self.admin_secret_key) if self.admin_access_key else None
        return Guard(store, self.cluster_secret, admin, self.auth_clock_skew_s)
