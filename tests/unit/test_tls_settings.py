"""TLS settings: where a client's TLS comes from, what a server refuses to start with, and a
development CA's files."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from cryptography import x509

from rocketspark.errors import ConfigError
from rocketspark.security.devca import make_dev_certificates
from rocketspark.security.settings import SecuritySettings
from rocketspark.security.tls import ClientTls


def test_a_client_takes_tls_from_its_arguments_else_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    certs = make_dev_certificates(tmp_path)
    for name in ("ROCKETSPARK_TLS", "ROCKETSPARK_TLS_CA_FILE", "ROCKETSPARK_TLS_CERT_FILE", "ROCKETSPARK_TLS_KEY_FILE"):
        monkeypatch.delenv(name, raising=False)
    assert ClientTls.resolve(None, None) is None  # plaintext by default
    system = ClientTls.resolve(True, None)
    assert system is not None and system.ca is None  # the system's CAs
    monkeypatch.setenv("ROCKETSPARK_TLS_CA_FILE", str(certs.ca_file))
    from_env = ClientTls.resolve(None, None)
    assert from_env is not None and from_env.ca_file == str(certs.ca_file)  # a CA file alone turns TLS on
    assert ClientTls.resolve(False, None) is None  # an argument wins over the environment
    monkeypatch.setenv("ROCKETSPARK_TLS", "false")
    assert ClientTls.resolve(None, None) is None
    assert "BEGIN" not in repr(from_env)  # no key or certificate bytes in a repr


def test_a_client_with_a_wrong_tls_file_fails_at_once_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"tls_ca_file '/nowhere/ca.pem' cannot be read"):
        ClientTls.resolve(True, "/nowhere/ca.pem")
    certs = make_dev_certificates(tmp_path)
    with pytest.raises(ConfigError, match="tls_cert_file and tls_key_file: give both"):
        ClientTls.resolve(True, str(certs.ca_file), str(certs.client_cert_file), None)


def test_a_server_refuses_to_start_with_tls_half_configured(tmp_path: Path) -> None:
    certs = make_dev_certificates(tmp_path)
    with pytest.raises(ConfigError, match="tls_enable needs tls_cert_file and tls_key_file"):
        SecuritySettings(tls_enable=True).check_security("127.0.0.1")
    with pytest.raises(ConfigError, match="tls_mutual needs tls_ca_file"):
        SecuritySettings(
            tls_enable=True,
            tls_cert_file=str(certs.server_cert_file),
            tls_key_file=str(certs.server_key_file),
            tls_mutual=True,
        ).check_security("127.0.0.1")
    with pytest.raises(ConfigError, match="tls_mutual needs tls_enable"):
        SecuritySettings(tls_mutual=True).check_security("127.0.0.1")
    with pytest.raises(ConfigError, match=r"tls_key_file '/nowhere/key\.pem' cannot be read"):
        SecuritySettings(
            tls_enable=True, tls_cert_file=str(certs.server_cert_file), tls_key_file="/nowhere/key.pem"
        ).check_security("127.0.0.1")
    settings = SecuritySettings(**certs.server_values(mutual=True))  # type: ignore[arg-type]
    peers = settings.peer_security()
    assert peers.server_tls is not None and peers.server_tls.mutual
    assert peers.client_tls is not None and peers.client_tls.cert_file == str(certs.server_cert_file)


def test_the_development_ca_signs_certificates_valid_for_this_host_and_keeps_keys_private(tmp_path: Path) -> None:
    certs = make_dev_certificates(tmp_path / "tls", hosts=["broker-1.example"])
    ca = x509.load_pem_x509_certificate(certs.ca_file.read_bytes())
    server = x509.load_pem_x509_certificates(certs.server_cert_file.read_bytes())
    assert server[1] == ca and server[0].issuer == ca.subject  # the chain: the certificate, then its CA
    names = server[0].extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert {"localhost", "broker-1.example"} <= set(names.get_values_for_type(x509.DNSName))
    assert {str(ip) for ip in names.get_values_for_type(x509.IPAddress)} >= {"127.0.0.1", "::1"}
    for key in (certs.server_key_file, certs.client_key_file):
        assert stat.S_IMODE(key.stat().st_mode) == 0o600


def test_security_off_loopback_needs_tls_and_a_bad_secret_is_never_echoed(tmp_path: Path) -> None:
    secured = {"auth_enable": True, "cluster_secret": "c" * 24}
    SecuritySettings(**secured).check_security("127.0.0.1")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"listen_host 0\.0\.0\.0 needs tls_enable: without TLS the user"):
        SecuritySettings(**secured).check_security("0.0.0.0")  # type: ignore[arg-type]
    certs = make_dev_certificates(tmp_path)
    SecuritySettings(**secured, **certs.server_values()).check_security("0.0.0.0")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="cluster_secret: the same secret of at least 16 characters"):
        SecuritySettings(cluster_secret="short").check_security("127.0.0.1")

    from broker.config import BrokerConfig
    from rocketspark.configfile import from_mapping

    with pytest.raises(ConfigError, match="cluster_secret must be str, got a int") as refused:
        from_mapping(BrokerConfig, {"cluster_secret": 123456789012345678}, "broker config")
    assert "123456789012345678" not in str(refused.value)
