"""The controller's config keys: off by default, addresses checked when the config loads."""

from __future__ import annotations

import pytest

from nameserver.config import NameServerConfig
from nameserver.server import NameServer
from rocketspark.errors import ConfigError


def test_the_controller_is_off_by_default_and_its_requests_still_have_handlers() -> None:
    nameserver = NameServer(NameServerConfig(data_dir=""))
    assert nameserver.controller is None
    assert {904, 1001, 1002, 1003, 1004, 1005, 1006} <= set(nameserver.dispatcher.handlers)


def test_a_raft_address_that_is_not_host_port_is_refused() -> None:
    with pytest.raises(ConfigError, match="controller address 'localhost' is not host:port"):
        NameServerConfig(controller_raft_address="localhost")
    with pytest.raises(ConfigError, match=r"controller address '127\.0\.0\.1:x' is not host:port"):
        NameServerConfig(controller_peers=["127.0.0.1:9879", "127.0.0.1:x"])


def test_the_peers_are_the_other_nodes() -> None:
    with pytest.raises(ConfigError, match=r"includes this node's own controller_raft_address 127\.0\.0\.1:9878"):
        NameServerConfig(controller_peers=["127.0.0.1:9878", "127.0.0.1:9879"])
    with pytest.raises(ConfigError, match="controller_broker_heartbeat_timeout_ms must be positive"):
        NameServerConfig(controller_broker_heartbeat_timeout_ms=0)


def test_a_controller_with_peers_and_no_cluster_secret_is_refused_naming_the_key() -> None:
    with pytest.raises(ConfigError, match=r"^controller_peers needs cluster_secret \("):
        NameServerConfig(controller_enable=True, controller_peers=["127.0.0.1:9879"])
    secured = NameServerConfig(controller_enable=True, controller_peers=["127.0.0.1:9879"], cluster_secret="s" * 24)
    assert secured.cluster_secret and not secured.auth_enable  # the secret is enough; auth may stay off
    assert NameServerConfig(controller_enable=True).controller_peers == []  # one node: no secret needed
