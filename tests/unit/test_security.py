"""Users, policies, the request signature and the server's guard, without a network."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path

import pytest

from rocketspark.errors import AuthenticationError, ConfigError, InvalidParameterError, NoPermissionError
from rocketspark.protocol.bodies import pack
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.shapes import SHAPES
from rocketspark.remoting.server import client_key
from rocketspark.security.acl import AclTable, Action, Decision, Need, UserType
from rocketspark.security.request_guard import Guard
from rocketspark.security.rules import RULES
from rocketspark.security.settings import SecuritySettings
from rocketspark.security.signing import CLUSTER_ACCESS_KEY, Credentials, read_signature, signature, verify
from rocketspark.security.store import AclStore

SECRET = "s" * 24


def test_the_signature_is_the_official_clients_hmac_sha1_of_the_date_time() -> None:
    # The header the official clients send, and what other languages' clients vary in it.
    headers = Credentials("abc", "secret").headers(at=1703706379.0)
    assert headers["x-mq-date-time"] == "20231227T194619Z"
    assert headers["authorization"] == (
        "MQv2-HMAC-SHA1 Credential=abc, SignedHeaders=x-mq-date-time, "
        f"Signature={signature('secret', '20231227T194619Z')}"
    )
    hex_upper = signature("secret", "20231227T194619Z").upper()
    other_language = f"MQv2-HMAC-SHA1 Credential=abc//Rocketmq, SignedHeaders=x-mq-date-time, Signature={hex_upper}"
    claim = read_signature("20231227T194619Z", other_language)
    assert claim.access_key == "abc"  # "<ak>//<suffix>" (Go, C++, C#) and upper-case hex are accepted
    verify(claim, "secret", 1703706379.0 + 5, skew_s=60)


def test_a_signature_is_refused_when_wrong_late_or_missing() -> None:
    headers = Credentials("etl", "right").headers(at=1_000_000.0)
    claim = read_signature(headers["x-mq-date-time"], headers["authorization"])
    with pytest.raises(AuthenticationError, match='user "etl": the signature does not match'):
        verify(claim, "wrong", 1_000_000.0, skew_s=60)
    with pytest.raises(AuthenticationError, match="outside the allowed skew of 60 s; synchronise the clocks"):
        verify(claim, "right", 1_000_000.0 + 61, skew_s=60)
    with pytest.raises(AuthenticationError, match="the request is not signed: this server requires credentials"):
        read_signature(None, None)


def test_credentials_never_show_their_secret_and_come_in_pairs(monkeypatch: pytest.MonkeyPatch) -> None:
    credentials = Credentials("etl", "very-secret-value")
    assert "very-secret-value" not in repr(credentials) and "very-secret-value" not in str(credentials)
    with pytest.raises(ConfigError, match="set both the access key and the secret key"):
        Credentials.resolve("etl", None)
    monkeypatch.setenv("ROCKETSPARK_ACCESS_KEY", "envuser")
    monkeypatch.setenv("ROCKETSPARK_SECRET_KEY", "envsecret")
    assert Credentials.resolve(None, None) == Credentials("envuser", "envsecret")


def test_policies_allow_by_name_and_prefix_and_a_deny_wins() -> None:
    table = AclTable().with_user("etl", "x")
    table = table.with_policy("etl", "Topic:orders-*", ["Pub", "Sub"], Decision.ALLOW)
    table = table.with_policy("etl", "Topic:orders-secret", ["Sub"], Decision.DENY)
    etl = table.users["etl"]
    assert etl.allows(_need("Topic:orders-eu", "Pub"))
    assert not etl.allows(_need("Topic:orders-secret", "Sub"))  # the Deny wins over the prefix's Allow
    assert not etl.allows(_need("Topic:orders-eu", "Create"))  # nothing allows it: denied
    assert str(_need("Topic:orders-eu", "Create")) == "Create on Topic:orders-eu"
    assert AclTable.from_wire(table.to_wire()) == table and table.version == 3
    with pytest.raises(InvalidParameterError, match='"Queue:x" is not a resource'):
        table.with_policy("etl", "Queue:x", ["Pub"], Decision.ALLOW)
    with pytest.raises(InvalidParameterError, match="the cluster's own identity"):
        table.with_user(CLUSTER_ACCESS_KEY, "x")


def _need(resource: str, action: str) -> Need:
    return Need(resource, frozenset({Action(action)}))


def test_every_request_code_with_a_shape_has_a_permission_rule() -> None:
    assert set(SHAPES) == set(RULES)


def test_the_table_file_is_readable_by_its_owner_only_and_only_newer_tables_are_kept(tmp_path: Path) -> None:
    store = AclStore(tmp_path / "acl.json")
    assert store.adopt(AclTable().with_user("etl", "x"))
    assert (tmp_path / "acl.json").stat().st_mode & 0o777 == 0o600
    assert not store.adopt(AclTable().with_user("old", "x"))  # version 1 again: not newer
    (tmp_path / "acl.json").chmod(0o644)
    again = AclStore(tmp_path / "acl.json").load()
    assert set(again.table.users) == {"etl"} and (tmp_path / "acl.json").stat().st_mode & 0o777 == 0o600


def _signed(credentials: Credentials, code: int, ext: Mapping[str, object], body: bytes = b"") -> RemotingCommand:
    return RemotingCommand.request(code, {**ext, **credentials.headers()}, body)


def test_the_guard_lets_the_cluster_do_anything_and_users_only_what_they_may() -> None:
    store = AclStore(None)
    store.adopt(AclTable().with_user("etl", "etl-secret").with_policy("etl", "Topic:orders", ["Pub"], Decision.ALLOW))
    store.adopt(store.table.with_user("root", "root-secret", UserType.SUPER))
    guard = Guard(store, SECRET)
    etl, root, cluster = (
        Credentials("etl", "etl-secret"),
        Credentials("root", "root-secret"),
        Credentials(CLUSTER_ACCESS_KEY, SECRET),
    )
    register = pack({"broker": "fake", "cluster": "c", "addr": "127.0.0.1:1"})
    for who, code, ext, body, refusal in (
        (etl, RequestCode.SEND_MESSAGE, {"topic": "orders"}, b"", None),
        (etl, RequestCode.SEND_MESSAGE, {"topic": "other"}, b"", 'user "etl" lacks Pub on Topic:other'),
        (etl, RequestCode.AUTH_GET_TABLE, {}, b"", 'user "etl" is not a super user'),
        (root, RequestCode.AUTH_GET_TABLE, {}, b"", None),
        (root, RequestCode.REGISTER_BROKER, {}, register, "only the cluster's own servers do"),
        (cluster, RequestCode.REGISTER_BROKER, {}, register, None),
    ):
        request = _signed(who, code, ext, body)
        if refusal is None:
            guard.authorize(request, guard.authenticate(request))
        else:
            with pytest.raises(NoPermissionError, match=refusal):
                guard.authorize(request, guard.authenticate(request))
    with pytest.raises(AuthenticationError, match='unknown access key "ghost"'):
        guard.authenticate(_signed(Credentials("ghost", "x"), RequestCode.SEND_MESSAGE, {"topic": "orders"}))
    stale = RemotingCommand.request(RequestCode.SEND_MESSAGE, {"topic": "orders", **etl.headers(at=time.time() - 3600)})
    with pytest.raises(AuthenticationError, match="outside the allowed skew"):
        guard.authenticate(stale)


def test_a_push_stream_is_kept_under_its_user_so_no_other_user_can_take_it_over() -> None:
    opened = RemotingCommand.request(RequestCode.OPEN_PUSH_STREAM, {"clientId": "c1"})
    assert client_key(opened) == "c1"  # security off: no users
    opened.user = "etl"  # what the dispatcher sets from the guard
    assert client_key(opened) == "etl/c1"


def test_the_admin_may_not_take_the_clusters_own_identity() -> None:
    with pytest.raises(ConfigError, match="the cluster's own identity"):
        SecuritySettings(admin_access_key=CLUSTER_ACCESS_KEY, admin_secret_key="x").check_security("127.0.0.1")


def test_a_send_that_may_create_its_topic_needs_create_as_well_as_pub() -> None:
    store = AclStore(None)
    store.adopt(AclTable().with_user("etl", "s").with_policy("etl", "Topic:*", ["Pub"], Decision.ALLOW))
    guard, etl = Guard(store, SECRET), Credentials("etl", "s")
    plain = _signed(etl, RequestCode.SEND_MESSAGE, {"topic": "orders"})
    guard.authorize(plain, guard.authenticate(plain))
    creating = _signed(etl, RequestCode.SEND_MESSAGE, {"topic": "orders", "defaultTopic": "TBW102"})
    with pytest.raises(NoPermissionError, match='user "etl" lacks Create on Topic:orders'):
        guard.authorize(creating, guard.authenticate(creating))


def test_a_groups_retry_and_dead_letter_topics_are_covered_by_sub_on_the_group() -> None:
    store = AclStore(None)
    table = AclTable().with_user("etl", "etl-secret", UserType.NORMAL)
    store.table = table.with_policy("etl", "Group:billing", ["Sub"], Decision.ALLOW)
    guard = Guard(store, SECRET)
    for code, topic in (
        (RequestCode.SEND_MESSAGE, "%RETRY%billing"),
        (RequestCode.SEND_MESSAGE, "%DLQ%billing"),
        (RequestCode.PULL_MESSAGE, "%RETRY%billing"),
        (RequestCode.GET_ROUTEINFO_BY_TOPIC, "%RETRY%billing"),
    ):
        guard.authorize(RemotingCommand.request(code, {"topic": topic, "consumerGroup": "billing"}), "etl")
    for code, topic, lacks in (
        (RequestCode.SEND_MESSAGE, "%RETRY%payroll", "Sub on Group:payroll"),
        (RequestCode.DELETE_TOPIC_IN_BROKER, "%RETRY%billing", "Delete on Topic:%RETRY%billing"),
    ):
        with pytest.raises(NoPermissionError, match=lacks):
            guard.authorize(RemotingCommand.request(code, {"topic": topic}), "etl")
