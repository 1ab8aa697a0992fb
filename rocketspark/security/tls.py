"""TLS for every port: the gRPC port through grpcio's TLS, the HA port through Python's ``ssl``.

``ServerTls`` is what a server listens with (its certificate and key; with ``mutual``, the CA
its clients' certificates must come from). ``ClientTls`` is what a caller connects with (the
CA it trusts, and its own certificate for mutual TLS). Servers are callers too (a broker
registering with a nameserver, a slave following its master): they trust ``tls_ca_file`` and
present their own certificate. Files are read when the object is made, so a wrong path is a
clear error at start, never a failed handshake later (the HA port's ``ssl`` contexts read the
certificate and key again, by path, when the server starts).
"""

from __future__ import annotations

import os
import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import grpc

from rocketspark.errors import ConfigError

ENV_TLS: Final = "ROCKETSPARK_TLS"
ENV_CA_FILE: Final = "ROCKETSPARK_TLS_CA_FILE"
ENV_CERT_FILE: Final = "ROCKETSPARK_TLS_CERT_FILE"
ENV_KEY_FILE: Final = "ROCKETSPARK_TLS_KEY_FILE"
_TRUE = {"1", "true", "yes", "on"}


def _read(path: str, what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"{what} {path!r} cannot be read: {exc.strerror or exc}") from None


@dataclass(frozen=True, slots=True)
class ClientTls:
    """How a caller connects over TLS. ``ca`` None trusts the system's CAs."""

    ca: bytes | None = field(repr=False)
    cert_chain: bytes | None = field(default=None, repr=False)
    key: bytes | None = field(default=None, repr=False)
    ca_file: str = ""  # for messages and reprs only
    cert_file: str = ""
    key_file: str = ""

    @classmethod
    def of_files(cls, ca_file: str = "", cert_file: str = "", key_file: str = "") -> ClientTls:
        if bool(cert_file) != bool(key_file):
            raise ConfigError("tls_cert_file and tls_key_file: give both (for mutual TLS), or neither")
        return cls(
            _read(ca_file, "tls_ca_file") if ca_file else None,
            _read(cert_file, "tls_cert_file") if cert_file else None,
            _read(key_file, "tls_key_file") if key_file else None,
            ca_file,
            cert_file,
            key_file,
        )

    @classmethod
    def resolve(
        cls, tls: bool | None, ca_file: str | None, cert_file: str | None = None, key_file: str | None = None
    ) -> ClientTls | None:
        """A client's TLS from its arguments, else the environment: ``ROCKETSPARK_TLS`` (true
        or false), ``ROCKETSPARK_TLS_CA_FILE`` (which alone turns TLS on), and for mutual TLS
        ``ROCKETSPARK_TLS_CERT_FILE``/``ROCKETSPARK_TLS_KEY_FILE``. None: plaintext."""
        if tls is None and ca_file:
            tls = True  # a CA given as an argument means TLS, whatever the environment says
        ca_file = ca_file if ca_file is not None else os.environ.get(ENV_CA_FILE, "")
        cert_file = cert_file if cert_file is not None else os.environ.get(ENV_CERT_FILE, "")
        key_file = key_file if key_file is not None else os.environ.get(ENV_KEY_FILE, "")
        if tls is None:
            env = os.environ.get(ENV_TLS)
            tls = env.strip().lower() in _TRUE if env is not None else bool(ca_file)
        if not tls:
            return None
        return cls.of_files(ca_file, cert_file, key_file)

    def grpc_credentials(self) -> grpc.ChannelCredentials:
        return grpc.ssl_channel_credentials(self.ca, self.key, self.cert_chain)

    def ssl_context(self) -> ssl.SSLContext:
        """For the HA port (asyncio streams)."""
        context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cadata=self.ca.decode() if self.ca else None)
        if self.cert_file:
            context.load_cert_chain(self.cert_file, self.key_file)
        return context

    def describe(self) -> str:
        trust = f"the CA in {self.ca_file}" if self.ca_file else "the system's CAs"
        return f"TLS trusting {trust}" + (f", client certificate {self.cert_file}" if self.cert_file else "")


@dataclass(frozen=True, slots=True)
class ServerTls:
    """How a server listens over TLS; with ``mutual``, clients must present a certificate
    signed by the CA in ``ca``."""

    cert_chain: bytes = field(repr=False)
    key: bytes = field(repr=False)
    ca: bytes | None = field(repr=False)
    mutual: bool
    cert_file: str
    key_file: str
    ca_file: str

    @classmethod
    def of_files(cls, cert_file: str, key_file: str, ca_file: str, mutual: bool) -> ServerTls:
        if not cert_file or not key_file:
            raise ConfigError("tls_enable needs tls_cert_file and tls_key_file: this server's certificate and key")
        if mutual and not ca_file:
            raise ConfigError("tls_mutual needs tls_ca_file: the CA the clients' certificates must be signed by")
        ca = _read(ca_file, "tls_ca_file") if ca_file else None
        return cls(
            _read(cert_file, "tls_cert_file"), _read(key_file, "tls_key_file"), ca, mutual, cert_file, key_file, ca_file
        )

    def grpc_credentials(self) -> grpc.ServerCredentials:
        return grpc.ssl_server_credentials(
            [(self.key, self.cert_chain)],
            root_certificates=self.ca if self.mutual else None,
            require_client_auth=self.mutual,
        )

    def ssl_context(self) -> ssl.SSLContext:
        """For the HA port (asyncio streams) and the metrics endpoint."""
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.cert_file, self.key_file)
        if self.mutual:
            context.load_verify_locations(cadata=self.ca.decode() if self.ca else None)
            context.verify_mode = ssl.CERT_REQUIRED
        return context

    def as_client(self) -> ClientTls:
        """What this server connects to its peers with: it trusts the cluster's CA and shows
        its own certificate (which mutual TLS on the peer asks for)."""
        return ClientTls(self.ca, self.cert_chain, self.key, self.ca_file, self.cert_file, self.key_file)
