"""Who may scrape /metrics: the settings that choose the scheme, and each scheme's answers."""

from __future__ import annotations

import base64

import pytest

from rocketspark.errors import ConfigError
from rocketspark.metrics.access import BearerToken, ClusterUsers
from rocketspark.security.acl import AclTable, Decision, UserType
from rocketspark.security.request_guard import Guard
from rocketspark.security.settings import SecuritySettings
from rocketspark.security.signing import CLUSTER_ACCESS_KEY
from rocketspark.security.store import AclStore

SECRET = "cluster-secret-0123456789"
TOKEN = "metrics-token-0123456789"
AUTH = {"auth_enable": True, "cluster_secret": SECRET}


def settings(**values: object) -> SecuritySettings:
    made = SecuritySettings(**values)  # type: ignore[arg-type]
    made.check_security("127.0.0.1")
    return made


def test_metrics_are_open_without_auth_and_want_a_user_with_it_unless_a_token_is_set() -> None:
    assert settings().metrics_scheme == "none" and settings().scrape_access(AclStore(None)) is None
    assert settings(**AUTH).metrics_scheme == "basic"
    assert isinstance(settings(**AUTH).scrape_access(AclStore(None)), ClusterUsers)
    assert settings(**AUTH, metrics_token=TOKEN).metrics_scheme == "bearer"
    assert isinstance(settings(metrics_token=TOKEN).scrape_access(AclStore(None)), BearerToken)
    assert settings(**AUTH, metrics_auth="none").scrape_access(AclStore(None)) is None  # an operator's choice


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"metrics_auth": "token"}, 'metrics_auth must be "none", "bearer", "basic" or ""'),
        ({"metrics_auth": "bearer"}, 'metrics_auth "bearer" needs metrics_token: .* at least 16 characters'),
        ({"metrics_auth": "bearer", "metrics_token": "short"}, "at least 16 characters"),
        ({"metrics_auth": "basic"}, 'metrics_auth "basic" checks the cluster\'s users, which needs auth_enable'),
        ({**AUTH, "metrics_auth": "basic", "metrics_token": TOKEN}, 'metrics_token is set but metrics_auth is "basic"'),
        ({"metrics_auth": "none", "metrics_token": TOKEN}, 'metrics_token is set but metrics_auth is "none"'),
    ],
)
def test_a_metrics_auth_that_cannot_work_stops_the_start(values: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        settings(**values)


def test_the_token_is_never_shown() -> None:
    assert TOKEN not in repr(settings(metrics_token=TOKEN))


def test_a_bearer_scrape_needs_the_token_and_is_told_what_to_send() -> None:
    access = BearerToken(TOKEN)
    assert access.check(f"Bearer {TOKEN}") is None and access.check(f"bearer  {TOKEN} ") is None
    for header in (None, "", "Bearer", f"Basic {TOKEN}", f"Token {TOKEN}"):
        refusal = access.check(header)
        assert refusal is not None and refusal.status == 401 and refusal.reason == "credentials"
        assert refusal.challenge == 'Bearer realm="rocketspark metrics"'
        assert "Authorization: Bearer <token>" in refusal.body and "\n" not in refusal.body
    wrong = access.check(f"Bearer {TOKEN}x")
    assert wrong is not None and 'error="invalid_token"' in wrong.challenge and wrong.body.startswith("wrong")


def basic(user: str, secret: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{secret}".encode()).decode()


def test_a_basic_scrape_needs_a_user_allowed_get_or_list_on_cluster() -> None:
    store = AclStore(None)
    table = AclTable().with_user("prom", "prom-secret").with_user("etl", "etl-secret")
    table = table.with_policy("prom", "Cluster", ["List"], Decision.ALLOW)
    store.adopt(table.with_user("root", "root-secret", UserType.SUPER))
    access = ClusterUsers(Guard(store, SECRET))
    for allowed in (basic("prom", "prom-secret"), basic("root", "root-secret"), basic(CLUSTER_ACCESS_KEY, SECRET)):
        assert access.check(allowed) is None
    denied = access.check(basic("etl", "etl-secret"))
    assert denied is not None and (denied.status, denied.challenge, denied.reason) == (403, "", "permission")
    assert (
        denied.body
        == 'user "etl" lacks Get or List on Cluster: grant it with rocketspark admin acl set etl Cluster Get'
    )
    for header in (None, "Basic !!!", "Basic " + base64.b64encode(b"no-colon").decode(), f"Bearer {TOKEN}"):
        refusal = access.check(header)
        assert refusal is not None and (refusal.status, refusal.reason) == (401, "credentials")
        assert refusal.challenge == 'Basic realm="rocketspark metrics", charset="UTF-8"'
        assert refusal.body.startswith("send a cluster user's access key and secret key with HTTP basic auth")
    for user, secret in (("prom", "not-prom-secret-42"), ("ghost", "prom-secret")):
        refusal = access.check(basic(user, secret))
        assert refusal is not None and refusal.status == 401
        assert (
            refusal.body.startswith(f'unknown access key "{user}" or wrong secret key') and secret not in refusal.body
        )
    store.adopt(store.table.without_policy("prom", "Cluster"))  # revoked: refused from the next scrape on
    revoked = access.check(basic("prom", "prom-secret"))
    assert revoked is not None and revoked.status == 403
