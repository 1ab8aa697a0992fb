"""Nameserver configuration: a frozen dataclass loaded from TOML; unknown keys are errors.

Defaults follow RocketMQ 5.x: scan for silent brokers every 5 s, drop one silent for 120 s.
The replica-group controller (``nameserver.controller``) is off unless ``controller_enable``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rocketspark import configfile
from rocketspark.errors import ConfigError
from rocketspark.security.settings import SecuritySettings

_HOST_PORT = re.compile(r"[^\s:]+:[0-9]{1,5}")


@dataclass(frozen=True, slots=True, kw_only=True)
class NameServerConfig(SecuritySettings):
    listen_host: str = "127.0.0.1"  # where to listen (0.0.0.0: every interface)
    listen_port: int = 9876  # the remoting port clients and brokers use (0 picks a free port)
    # Prometheus /metrics over HTTP (HTTPS with tls_enable); 0: any free port (logged), -1: off
    metrics_port: int = 0
    scan_interval_ms: int = 5000  # how often silent brokers are looked for (4.x: 10 s)
    broker_expired_ms: int = 120_000  # a broker silent this long is dropped from routes
    notify_scan_interval_ms: int = 1000  # how often the names of changed routes are pushed to subscribed clients
    # pushes pause while the load average is above this per core (the 30 s refresh carries on)
    notify_max_load_per_cpu: float = 2.0
    notify_max_memory_used: float = 0.95  # pushes pause while more than this fraction of memory is used
    # route-change subscriptions one client may hold; past it, its topics are polled (0: every client polls)
    max_subscriptions_per_client: int = 10_000
    # the brokers it served (known-brokers.json): after a restart it answers "not ready", never "no such topic",
    # until they have registered again
    data_dir: str = "data/nameserver"
    # ... or until this long after its start (a broker that died will not register again)
    startup_wait_ms: int = 10_000
    controller_enable: bool = False  # run the replica-group controller in this nameserver
    # this node's Raft address: fixed, since the other nameservers name it
    controller_raft_address: str = "127.0.0.1:9878"
    # the other controller nodes' Raft addresses (none: a one-node controller, no Raft port); needs cluster_secret
    controller_peers: list[str] = field(default_factory=list)
    controller_data_dir: str = "data/controller"  # Raft journal and dump: a restarted nameserver rejoins with its state
    # a master silent this long is replaced from its SyncStateSet (sooner when it is plainly gone); above the
    # brokers' master_lease_ms
    controller_broker_heartbeat_timeout_ms: int = 2500

    def __post_init__(self) -> None:
        self.check_security(self.listen_host)
        if not 0 <= self.listen_port < 65536:
            raise ConfigError(f"listen_port {self.listen_port} is not a port number (0-65535)")
        if not -1 <= self.metrics_port < 65536:
            raise ConfigError(f"metrics_port {self.metrics_port} is not a port number (0-65535), or -1 (off)")
        if self.startup_wait_ms < 0:
            raise ConfigError(f"startup_wait_ms {self.startup_wait_ms} must be >= 0 (0: ready at once)")
        if self.scan_interval_ms <= 0 or self.broker_expired_ms <= 0 or self.notify_scan_interval_ms <= 0:
            raise ConfigError("scan_interval_ms, broker_expired_ms and notify_scan_interval_ms must be positive")
        if self.notify_max_load_per_cpu < 0:
            raise ConfigError(f"notify_max_load_per_cpu {self.notify_max_load_per_cpu} must be >= 0")
        if self.max_subscriptions_per_client < 0:
            raise ConfigError(
                f"max_subscriptions_per_client {self.max_subscriptions_per_client} must be >= 0 (0: clients only poll)"
            )
        if not 0 <= self.notify_max_memory_used <= 1:
            raise ConfigError(
                f"notify_max_memory_used {self.notify_max_memory_used} must be a fraction between 0 and 1"
            )
        self._check_controller()

    def _check_controller(self) -> None:
        if self.controller_broker_heartbeat_timeout_ms <= 0:
            raise ConfigError("controller_broker_heartbeat_timeout_ms must be positive")
        for address in (self.controller_raft_address, *self.controller_peers):
            if not isinstance(address, str) or not _HOST_PORT.fullmatch(address):
                raise ConfigError(f"controller address {address!r} is not host:port (e.g. 127.0.0.1:9878)")
        if self.controller_enable and self.controller_peers and not self.cluster_secret:
            raise ConfigError(
                "controller_peers needs cluster_secret (the same secret of at least 16 characters on every "
                "nameserver): the controllers' Raft port authenticates and encrypts every message with it, and "
                "without it would run what anyone sends there"
            )
        if self.controller_raft_address in self.controller_peers:
            raise ConfigError(
                f"controller_peers lists the other controller nodes; it includes this node's own "
                f"controller_raft_address {self.controller_raft_address}"
            )


def load(path: str | Path | None, **overrides: Any) -> NameServerConfig:
    return configfile.load(NameServerConfig, path, overrides)
