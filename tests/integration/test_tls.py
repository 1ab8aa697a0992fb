"""TLS on every port, on real processes: the gRPC port of nameservers and brokers and a
master's HA port; what a client with the wrong TLS settings is told."""

from __future__ import annotations

import socket
import ssl
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocketspark import Admin, Consumer, LocalCluster, Message, Producer
from rocketspark.errors import ConnectError, TlsError
from rocketspark.protocol.bodies import unpack
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.remoting.client import RemotingClient, check
from rocketspark.security.acl import AclTable
from rocketspark.security.devca import make_dev_certificates
from rocketspark.security.signing import CLUSTER_ACCESS_KEY, Credentials
from rocketspark.security.tls import ClientTls

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def mutual() -> Iterator[LocalCluster]:
    """Users and mutual TLS on; one replica group of two, the slave in the SyncStateSet."""
    config = {"in_sync_replicas": 2, "auto_create_topic_enable": False}
    with LocalCluster(
        brokers=1, replicas=2, processes=True, auth=True, tls=True, tls_mutual=True, broker_config=config
    ) as c:
        with Admin(c.nameserver, **c.client_options) as admin:
            deadline = time.monotonic() + 30
            while len(admin.replica_groups()["broker-a"].sync_state_set) < 2:
                assert time.monotonic() < deadline, "the slave never joined the SyncStateSet over TLS"
                time.sleep(0.1)
            admin.create_topic("orders", queues=1)
        yield c


def test_a_client_with_the_cluster_ca_and_a_certificate_sends_and_reads(mutual: LocalCluster) -> None:
    options = mutual.client_options
    assert options["tls"] and options["tls_ca_file"] == mutual.tls_ca_file and options["tls_cert_file"]
    with Producer(mutual.nameserver, **options) as producer:  # in_sync_replicas = 2: copied over the HA port
        assert producer.send(Message("orders", b"over tls", queue_id=0)).queue_offset == 0
    with Consumer(mutual.nameserver, **options) as consumer:
        assert [m.body for m in consumer.pull("orders", 0, 0, 10).messages] == [b"over tls"]


def test_a_plaintext_client_is_told_to_turn_tls_on(mutual: LocalCluster) -> None:
    auth = {"access_key": mutual.admin_access_key, "secret_key": mutual.admin_secret_key}
    hint = "as a TLS server does with a plaintext client: connect with TLS and the cluster's CA: tls=True"
    refused = pytest.raises(TlsError, match=hint)
    with Producer(mutual.nameserver, tls=False, **auth) as producer, refused:
        producer.send(Message("orders", b"x", queue_id=0))


def test_a_server_certificate_from_another_ca_is_refused(mutual: LocalCluster, tmp_path: Path) -> None:
    other = make_dev_certificates(tmp_path / "other-ca")
    options = mutual.client_options | {"tls_ca_file": str(other.ca_file)}
    refused = pytest.raises(TlsError, match=r"its certificate is not signed by a CA this client trusts \(the CA in ")
    with Producer(mutual.nameserver, **options) as producer, refused:
        producer.send(Message("orders", b"x", queue_id=0))


def test_mutual_tls_refuses_a_client_without_a_certificate(mutual: LocalCluster, tmp_path: Path) -> None:
    options = {k: v for k, v in mutual.client_options.items() if k not in ("tls_cert_file", "tls_key_file")}
    refused = pytest.raises(TlsError, match=r"mutual TLS .* give tls_cert_file and tls_key_file")
    with Producer(mutual.nameserver, **options) as producer, refused:
        producer.send(Message("orders", b"x", queue_id=0))
    other = make_dev_certificates(tmp_path / "other-ca")  # a certificate, but not from the cluster's CA
    stranger = options | {"tls_cert_file": str(other.client_cert_file), "tls_key_file": str(other.client_key_file)}
    refused = pytest.raises(TlsError, match=f"does not accept the client certificate {other.client_cert_file}")
    with Producer(mutual.nameserver, **stranger) as producer, refused:
        producer.send(Message("orders", b"x", queue_id=0))


def _ha_port(cluster: LocalCluster) -> tuple[str, int]:
    """The master's HA port, asked the way a slave asks (the cluster credential, over TLS)."""
    with Admin(cluster.nameserver, **cluster.client_options) as admin:
        view = admin.replica_groups()["broker-a"]
    assert view.master is not None
    tls = ClientTls.of_files(
        str(cluster.tls_ca_file), str(cluster.tls_client_cert_file), str(cluster.tls_client_key_file)
    )
    client = RemotingClient(credentials=Credentials(CLUSTER_ACCESS_KEY, cluster.security.cluster_secret), tls=tls)
    try:
        request = RemotingCommand.request(RequestCode.HA_GET_EPOCHS, {"masterEpoch": view.epoch})
        port = int(check(client.invoke(view.master, request)).ext["haPort"])
    finally:
        client.close()
    return view.master.rsplit(":", 1)[0], port


def test_the_ha_port_speaks_only_mutual_tls(mutual: LocalCluster) -> None:
    host, port = _ha_port(mutual)
    with socket.create_connection((host, port), timeout=5) as plain:
        plain.sendall(b"\0" * 64)  # a plaintext slave's first bytes: the TLS server answers with an alert or closes
        first = plain.recv(64)
    assert len(first) != 16 and (first == b"" or first[0] == 0x15), first  # never the plaintext challenge
    no_certificate = ssl.create_default_context(cafile=mutual.tls_ca_file)
    with socket.create_connection((host, port), timeout=5) as raw:
        try:  # TLS 1.3: the server's refusal arrives with the first read, as an alert or a close
            got = no_certificate.wrap_socket(raw, server_hostname=host).recv(16)
        except (ssl.SSLError, ConnectionResetError):
            got = b""
    assert got == b"", "a slave without a certificate was given the challenge"
    with_certificate = ssl.create_default_context(cafile=mutual.tls_ca_file)
    with_certificate.load_cert_chain(str(mutual.tls_client_cert_file), str(mutual.tls_client_key_file))
    with (
        socket.create_connection((host, port), timeout=5) as raw,
        with_certificate.wrap_socket(raw, server_hostname=host) as tls,
    ):
        assert len(tls.recv(16)) == 16  # the master's challenge, inside TLS


def test_a_slave_that_missed_a_user_change_takes_it_from_its_master(mutual: LocalCluster) -> None:
    with Admin(mutual.nameserver, **mutual.client_options) as admin:
        view = admin.replica_groups()["broker-a"]
        slave = next(r.address for r in view.replicas if r.address != view.master)
        mutual.pause(slave)
        try:
            change = admin.create_user("while-paused", "while-paused-secret")
        finally:
            mutual.resume(slave)
        assert list(change.missed) == [slave]
        deadline = time.monotonic() + 10
        while "while-paused" not in _users(admin, slave):
            assert time.monotonic() < deadline, "the slave never took the table from its master"
            time.sleep(0.2)


def _users(admin: Admin, address: str) -> set[str]:
    """The users a server holds; none while it reconnects after its pause."""
    try:
        response = admin.call(address, RemotingCommand.request(RequestCode.AUTH_GET_TABLE))
    except ConnectError:
        return set()
    return set(AclTable.from_wire(unpack(response.body)).users)


def test_one_way_tls_refuses_plaintext_and_a_tls_client_is_told_a_plaintext_server_has_no_tls() -> None:
    with LocalCluster(brokers=1, tls=True) as one_way, LocalCluster(brokers=1) as plaintext:
        with Producer(one_way.nameserver, **one_way.client_options) as producer:  # no client certificate needed
            producer.send(Message("auto", b"over one-way tls"))
        refused = pytest.raises(TlsError, match="as a TLS server does with a plaintext client")
        with Producer(one_way.nameserver, tls=False) as producer, refused:
            producer.send(Message("auto", b"x"))
        refused = pytest.raises(TlsError, match="does not speak TLS: connect without tls, or turn tls_enable on")
        with Producer(plaintext.nameserver, **one_way.client_options) as producer, refused:
            producer.send(Message("auto", b"x"))
