"""The security of a development cluster (``LocalCluster``, ``rocketspark cluster up``): a
fresh cluster secret and admin user with ``auth``, a development CA with ``tls``; what its
servers are configured with and what its clients need."""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rocketspark.security.devca import DevCertificates, make_dev_certificates
from rocketspark.security.tls import ServerTls

log = logging.getLogger(__name__)
ADMIN_ACCESS_KEY = "admin"


@dataclass(frozen=True)
class LocalSecurity:
    auth: bool
    tls_mutual: bool
    certificates: DevCertificates | None
    admin_access_key: str | None
    admin_secret_key: str | None = field(repr=False)
    cluster_secret: str = field(repr=False)

    @classmethod
    def make(cls, *, auth: bool, tls: bool, tls_mutual: bool, directory: Path) -> LocalSecurity:
        """Fresh secrets; with ``tls`` a development CA and certificates in ``directory``/tls."""
        certificates = make_dev_certificates(directory / "tls") if tls else None
        if certificates is not None:
            log.info("TLS on: development CA and certificates in %s", certificates.directory)
        return cls(
            auth,
            tls_mutual,
            certificates,
            ADMIN_ACCESS_KEY if auth else None,
            secrets.token_hex(16) if auth else None,
            secrets.token_hex(24),  # always: it authenticates the controllers' Raft port, auth or not
        )

    def server_values(self) -> dict[str, Any]:
        """The security keys of every server's configuration."""
        values: dict[str, Any] = {"cluster_secret": self.cluster_secret} if self.cluster_secret else {}
        if self.auth:
            values |= {
                "auth_enable": True,
                "admin_access_key": self.admin_access_key,
                "admin_secret_key": self.admin_secret_key,
            }
        if self.certificates is not None:
            values |= self.certificates.server_values(mutual=self.tls_mutual)
        return values

    def console_tls(self) -> ServerTls | None:
        """What the console listens with: the servers' certificate (no client certificate asked)."""
        files = self.certificates
        if files is None:
            return None
        return ServerTls.of_files(str(files.server_cert_file), str(files.server_key_file), str(files.ca_file), False)

    def client_files(self) -> tuple[str | None, str | None, str | None]:
        """The CA clients trust, and the client certificate and key (None each without TLS)."""
        files = self.certificates
        if files is None:
            return None, None, None
        return str(files.ca_file), str(files.client_cert_file), str(files.client_key_file)

    def client_options(self) -> dict[str, Any]:
        """The admin's credentials and the TLS files, as client keywords."""
        options: dict[str, Any] = {}
        if self.auth:
            options |= {"access_key": self.admin_access_key, "secret_key": self.admin_secret_key}
        if self.certificates is not None:
            options |= {"tls": True, "tls_ca_file": str(self.certificates.ca_file)}
            if self.tls_mutual:
                options |= {
                    "tls_cert_file": str(self.certificates.client_cert_file),
                    "tls_key_file": str(self.certificates.client_key_file),
                }
        return options
