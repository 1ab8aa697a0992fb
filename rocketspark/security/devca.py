"""A development certificate authority: what ``cluster up --tls`` and ``LocalCluster(tls=True)``
use, so that TLS can be tried without an organisation's PKI.

It makes a CA, one certificate for every server of the cluster (valid for ``127.0.0.1``,
``::1``, ``localhost`` and this host's name, usable as a server and as a client certificate,
since servers also call each other), and one client certificate for mutual TLS. Keys are
ECDSA P-256 and written 0600. A production cluster uses certificates from its own CA instead
and names them in the ``tls_*`` configuration keys.
"""

from __future__ import annotations

import datetime
import ipaddress
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from rocketspark.security.private import write_private

VALID_DAYS: Final = 365
_DER_PEM = serialization.Encoding.PEM


@dataclass(frozen=True, slots=True)
class DevCertificates:
    """Where a development CA put its files."""

    directory: Path
    ca_file: Path  # what clients trust (tls_ca_file)
    server_cert_file: Path
    server_key_file: Path
    client_cert_file: Path  # for mutual TLS (tls_cert_file)
    client_key_file: Path

    def server_values(self, *, mutual: bool = False) -> dict[str, object]:
        """The ``tls_*`` configuration keys of a server using these certificates."""
        return {
            "tls_enable": True,
            "tls_cert_file": str(self.server_cert_file),
            "tls_key_file": str(self.server_key_file),
            "tls_ca_file": str(self.ca_file),
            "tls_mutual": mutual,
        }


def make_dev_certificates(directory: Path, hosts: list[str] | None = None) -> DevCertificates:
    """Create a CA and the cluster's certificates in ``directory`` (created 0700 if missing).

    ``hosts``: names and addresses the server certificate is valid for, besides the local ones.
    """
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "rocketspark development CA")])
    ca_cert = (
        _builder(ca_name, ca_name, ca_key.public_key())
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(ca=True), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    files = DevCertificates(
        directory,
        directory / "ca.pem",
        directory / "server.pem",
        directory / "server-key.pem",
        directory / "client.pem",
        directory / "client-key.pem",
    )
    files.ca_file.write_bytes(ca_cert.public_bytes(_DER_PEM))
    names = ["localhost", socket.gethostname(), "127.0.0.1", "::1", *(hosts or [])]
    _issue(files.server_cert_file, files.server_key_file, "rocketspark server", names, ca_cert, ca_key)
    _issue(files.client_cert_file, files.client_key_file, "rocketspark client", [], ca_cert, ca_key)
    return files


def _issue(
    cert_file: Path,
    key_file: Path,
    common_name: str,
    names: list[str],
    ca_cert: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    builder = (
        _builder(subject, ca_cert.subject, key.public_key())
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(ca=False), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False
        )
    )
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(_general_names(names)), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    cert_file.write_bytes(cert.public_bytes(_DER_PEM) + ca_cert.public_bytes(_DER_PEM))  # the chain
    pem = key.private_bytes(_DER_PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    write_private(key_file, pem)


def _builder(subject: x509.Name, issuer: x509.Name, public_key: ec.EllipticCurvePublicKey) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
    )


def _key_usage(*, ca: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=not ca,
        key_cert_sign=ca,
        crl_sign=ca,
        encipher_only=False,
        decipher_only=False,
    )


def _general_names(names: list[str]) -> list[x509.GeneralName]:
    result: list[x509.GeneralName] = []
    for name in dict.fromkeys(names):  # in order, once each
        try:
            result.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            result.append(x509.DNSName(name))
    return result
