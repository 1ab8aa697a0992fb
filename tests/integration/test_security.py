"""Security on, on real processes: who is refused what, and a fake broker kept out."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from rocketspark import Admin, Consumer, LocalCluster, Message, Producer
from rocketspark.errors import AuthenticationError, ConnectError, NoPermissionError
from rocketspark.protocol.bodies import pack
from rocketspark.protocol.codes import RequestCode, ResponseCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.remoting.client import RemotingClient
from rocketspark.security.acl import AclTable, UserType
from rocketspark.security.request_guard import Guard
from rocketspark.security.signing import Credentials
from rocketspark.security.store import AclStore

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def secured() -> Iterator[LocalCluster]:
    with LocalCluster(brokers=1, processes=True, auth=True, broker_config={"auto_create_topic_enable": False}) as c:
        assert c.admin_access_key and c.admin_secret_key
        with Admin(c.nameserver, access_key=c.admin_access_key, secret_key=c.admin_secret_key) as admin:
            admin.create_topic("orders", queues=2)
            admin.create_topic("payroll", queues=1)
            admin.create_user("etl", "etl-secret")
            admin.set_acl("etl", "Topic:orders", ["Pub", "Sub"])
            admin.set_acl("etl", "Group:etl-*", ["Sub"])
            admin.create_user("reader", "reader-secret")
            admin.set_acl("reader", "Topic:orders", ["Sub"])
        yield c


def test_anonymous_wrong_secret_and_unknown_users_are_refused_with_a_reason(secured: LocalCluster) -> None:
    for ak, sk, reason in (
        (None, None, "the request is not signed: this server requires credentials"),
        ("etl", "wrong", 'user "etl": the signature does not match'),
        ("ghost", "x", 'unknown access key "ghost"'),
    ):
        refused = pytest.raises(AuthenticationError, match=reason)
        with Producer(secured.nameserver, access_key=ak, secret_key=sk) as producer, refused:
            producer.send(Message("orders", b"x"))


def test_a_request_signed_an_hour_ago_is_refused(secured: LocalCluster) -> None:
    client = RemotingClient(peer_kind="nameserver")
    try:
        stale = Credentials("etl", "etl-secret").headers(at=time.time() - 3600)
        request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "orders", **stale})
        response = client.invoke(secured.nameserver_addresses[0], request)
    finally:
        client.close()
    assert response.code == ResponseCode.NO_PERMISSION
    assert "outside the allowed skew of 300 s" in response.remark and "etl-secret" not in response.remark


def test_each_user_does_what_its_policies_allow_and_no_more(secured: LocalCluster) -> None:
    ns = secured.nameserver
    with Producer(ns, access_key="etl", secret_key="etl-secret") as producer:
        producer.send(Message("orders", b"allowed", queue_id=0))
        with pytest.raises(NoPermissionError, match='user "etl" lacks Get or Pub or Sub on Topic:payroll'):
            producer.send(Message("payroll", b"not allowed"))
    refused = pytest.raises(NoPermissionError, match='user "reader" lacks Pub on Topic:orders')
    with Producer(ns, access_key="reader", secret_key="reader-secret") as producer, refused:
        producer.send(Message("orders", b"not allowed", queue_id=0))
    with Consumer(ns, access_key="reader", secret_key="reader-secret") as consumer:
        assert [m.body for m in consumer.pull("orders", 0, 0, 10).messages][:1] == [b"allowed"]
        with pytest.raises(NoPermissionError, match='user "reader" lacks Sub on Group:g'):
            consumer.commit_offset("g", "orders", 0, 1)
    with Consumer(ns, access_key="etl", secret_key="etl-secret") as consumer:
        consumer.commit_offset("etl-daily", "orders", 0, 1)
    with Admin(ns, access_key="etl", secret_key="etl-secret") as admin:
        for action, reason in (
            (lambda: admin.create_topic("new-topic"), 'user "etl" lacks Create or Update on Topic:new-topic'),
            (lambda: admin.wipe_write_perm("broker-a"), 'user "etl" lacks Update on Cluster'),
            (lambda: admin.broker_counters("broker-a"), 'user "etl" lacks Get on Cluster'),
            (lambda: admin.create_user("mallory", "x"), 'user "etl" is not a super user'),
        ):
            with pytest.raises(NoPermissionError, match=reason):
                action()


def test_an_unknown_process_cannot_register_a_broker_and_no_route_names_it(secured: LocalCluster) -> None:
    registration = pack({"broker": "fake", "cluster": "DefaultCluster", "addr": "127.0.0.1:1", "topics": []})
    admin_credentials = Credentials(str(secured.admin_access_key), str(secured.admin_secret_key))
    for credentials, reason in (
        (None, "the request is not signed"),
        (admin_credentials, "only the cluster's own servers do"),  # not even a super user
    ):
        client = RemotingClient(peer_kind="nameserver", credentials=credentials)
        try:
            request = RemotingCommand.request(RequestCode.REGISTER_BROKER, {}, registration)
            response = client.invoke(secured.nameserver_addresses[0], request)
        finally:
            client.close()
        assert response.code == ResponseCode.NO_PERMISSION and reason in response.remark
    with Admin(
        secured.nameserver, access_key=admin_credentials.access_key, secret_key=admin_credentials.secret_key
    ) as admin:
        assert "fake" not in admin.cluster_list()["brokers"]
        assert [b.broker_name for b in admin.topic_route("orders").brokers] == ["broker-a"]


def served_codes(cluster: LocalCluster) -> dict[str, tuple[set[int], set[int]]]:
    """The request codes a broker and a nameserver register, unary and streaming, by address:
    their dispatchers refuse to register a code without a permission rule."""
    from broker.broker import Broker
    from broker.config import BrokerConfig
    from nameserver.config import NameServerConfig
    from nameserver.server import NameServer

    broker = Broker(BrokerConfig(data_dir=str(cluster.data_dir / "probe"))).dispatcher
    nameserver = NameServer(NameServerConfig(data_dir="")).dispatcher
    return {
        cluster.brokers["broker-a"]: (set(broker.handlers), set(broker.stream_handlers)),
        cluster.nameserver_addresses[0]: (set(nameserver.handlers), set(nameserver.stream_handlers)),
    }


# Reviewed: what every signed user may do, whatever its policies (a client cannot work without it).
ANY_SIGNED_USER = {
    RequestCode.GET_BROKER_CLUSTER_INFO,
    RequestCode.OPEN_PUSH_STREAM,
    RequestCode.UNSUBSCRIBE_TOPIC_ROUTE,
}


def test_every_request_code_needs_a_permission_a_user_without_policies_lacks(secured: LocalCluster) -> None:
    """A new request code given a rule any signed user passes fails here, unless reviewed into
    ANY_SIGNED_USER. Checked at the guard itself, with the request fields every rule reads."""
    store = AclStore(None)
    store.table = AclTable().with_user("nobody", "nobody-secret", UserType.NORMAL)
    guard = Guard(store, "c" * 24)
    body = pack({"mapping": {"topic": "orders"}})
    fields = {"topic": "orders", "consumerGroup": "g", "topics": ["orders"], "defaultTopic": "TBW102"}
    codes: set[int] = set().union(*(unary | stream for unary, stream in served_codes(secured).values()))
    assert codes >= ANY_SIGNED_USER
    for code in sorted(codes - ANY_SIGNED_USER):
        with pytest.raises(NoPermissionError):
            guard.authorize(RemotingCommand.request(code, fields, body), "nobody")
    for code in ANY_SIGNED_USER:
        guard.authorize(RemotingCommand.request(code, fields, body), "nobody")


def test_a_pull_and_a_static_topic_change_are_refused_without_their_permission(secured: LocalCluster) -> None:
    ns = secured.nameserver
    with Admin(ns, **secured.client_options) as admin:
        admin.create_user("peeker", "peeker-secret")
        admin.set_acl("peeker", "Topic:payroll", ["Get"])  # its route and bounds, not its messages
        admin.set_acl("peeker", "Topic:static-*", ["Get"])
    peeker = {"access_key": "peeker", "secret_key": "peeker-secret"}
    refused = pytest.raises(NoPermissionError, match='user "peeker" lacks Sub on Topic:payroll')
    with Consumer(ns, **peeker) as consumer, refused:
        consumer.pull("payroll", 0, 0, 10)
    refused = pytest.raises(NoPermissionError, match='user "peeker" lacks Create or Update on Topic:static-orders')
    with Admin(ns, **peeker) as admin, refused:
        admin.create_static_topic("static-orders", 2)


def test_every_request_code_a_server_serves_refuses_an_anonymous_caller(secured: LocalCluster) -> None:
    """Walks the codes the running servers registered: none answers anything but NO_PERMISSION
    to the unsigned."""
    client = RemotingClient()
    try:
        served = served_codes(secured)
        assert all(unary for unary, _ in served.values()) and any(stream for _, stream in served.values())
        for address, (unary, stream) in served.items():
            for code in sorted(unary):
                response = client.invoke(address, RemotingCommand.request(code, {"topic": "orders"}))
                assert response.code == ResponseCode.NO_PERMISSION, (address, code, response.remark)
            for code in sorted(stream):
                request = RemotingCommand.request(code, {"topic": "orders", "clientId": "c"})
                response = next(client.invoke_stream(address, request, 5000))
                assert response.code == ResponseCode.NO_PERMISSION, (address, code, response.remark)
    finally:
        client.close()


def test_a_replica_group_with_security_on_copies_and_acknowledges_through_the_cluster_credential() -> None:
    """The controller (Raft encrypted with the cluster secret), a replica's heartbeat and the HA
    port's proof all run signed: with in_sync_replicas = 2 a send is acknowledged only once the
    slave copied it."""
    with LocalCluster(brokers=1, replicas=2, processes=True, auth=True, broker_config={"in_sync_replicas": 2}) as c:
        ak, sk = c.admin_access_key, c.admin_secret_key
        with Admin(c.nameserver, access_key=ak, secret_key=sk) as admin:
            deadline = time.monotonic() + 30
            while len(admin.replica_groups()["broker-a"].sync_state_set) < 2:
                assert time.monotonic() < deadline, "the slave never joined the SyncStateSet"
                time.sleep(0.1)
            admin.create_topic("replicated", queues=1)
        with Producer(c.nameserver, access_key=ak, secret_key=sk) as producer:
            assert producer.send(Message("replicated", b"copied", queue_id=0)).queue_offset == 0


def test_a_server_that_missed_a_user_change_catches_up_when_the_broker_next_registers() -> None:
    """A broker down during a change takes the newer table from the nameserver when it
    registers again; a nameserver down during one gets it from the next registration."""
    with (
        LocalCluster(
            brokers=1, nameservers=2, processes=True, auth=True, broker_config={"register_interval_ms": 500}
        ) as c,
        Admin(c.nameserver, **c.client_options) as admin,
    ):
        admin.create_topic("orders", queues=1)
        c.stop_broker("broker-a")
        missed_by_broker = admin.create_user("late", "late-secret")
        assert list(missed_by_broker.missed) == [] and len(missed_by_broker.applied) == 2  # the nameservers only
        admin.set_acl("late", "Topic:orders", ["Pub"])
        c.start_broker("broker-a")  # registers at start: finds the nameserver's table newer
        with Producer(c.nameserver, access_key="late", secret_key="late-secret") as producer:
            assert producer.send(Message("orders", b"caught up", queue_id=0)).queue_offset == 0

        nameserver = c.nameserver_addresses[1]
        c.kill_nameserver(nameserver)
        missed_by_nameserver = admin.create_user("later", "later-secret")  # only the broker takes it
        assert list(missed_by_nameserver.missed) == [nameserver]
        admin.set_acl("later", "Topic:orders", ["Sub"])
        c.restart_nameserver(nameserver)
        deadline = time.monotonic() + 10
        with Consumer(nameserver, access_key="later", secret_key="later-secret") as consumer:
            while True:  # the route comes from the nameserver: it knows "later" once the broker re-registered
                try:
                    assert [m.body for m in consumer.pull("orders", 0, 0, 10).messages] == [b"caught up"]
                    break
                except (AuthenticationError, ConnectError):  # not yet caught up, or still reconnecting
                    assert time.monotonic() < deadline, "the nameserver never caught up"
                    time.sleep(0.2)
