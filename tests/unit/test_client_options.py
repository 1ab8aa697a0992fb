"""Client construction: the route options every client takes, checked in one place."""

from __future__ import annotations

import pytest

from rocketspark import Admin, Consumer, Producer
from rocketspark.client.routes import RouteOptions
from rocketspark.errors import InvalidParameterError

NS = "127.0.0.1:9876"


@pytest.mark.parametrize("client", [Producer, Consumer, Admin])
def test_route_options_reach_the_route_cache(client: type[Producer | Consumer | Admin]) -> None:
    with client(NS, poll_interval_ms=1000, topic_expiry_ms=2000, not_found_ttl_ms=0, route_push=False) as c:
        assert c.routes.options == RouteOptions(1000, 2000, 0, False)
        assert c.routes.subscriber is None
    with client(NS) as c:
        assert c.routes.options == RouteOptions()


def test_an_unknown_keyword_is_named_with_the_known_ones() -> None:
    with pytest.raises(TypeError, match=r"Consumer\(\) got unexpected keyword argument\(s\) poll_interval;.*"):
        Consumer(NS, poll_interval=5)  # type: ignore[call-arg]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"poll_interval_ms": 0}, "poll_interval_ms must be a positive"),
        ({"topic_expiry_ms": -1}, "topic_expiry_ms must be a positive"),
        ({"not_found_ttl_ms": -5}, "not_found_ttl_ms must be 0"),
    ],
)
def test_bad_route_options_are_refused(options: dict[str, int], message: str) -> None:
    with pytest.raises(InvalidParameterError, match=message):
        Producer(NS, **options)  # type: ignore[arg-type]


def test_the_nameserver_list_is_the_route_cache_s() -> None:
    with Admin(NS, route_push=False) as admin:
        admin.update_nameservers("127.0.0.1:1;127.0.0.1:2")
        assert admin.nameservers == ["127.0.0.1:1", "127.0.0.1:2"] == admin.routes.namesrv.addresses
