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
    listen_host: str = "127.0.0.1"
    listen_port: int = 9876  # 0 picks a free port
    metrics_port: int = 0  # Prometheus /metrics over HTTP (HTTPS with tls_enable); 0: any free one, -1: off
    scan_interval_ms: int = 5000  # how often silent brokers are looked for (4.x: 10 s)
    broker_expired_ms: int = 120_000  # a broker silent this long is dropped from routes
    notify_scan_interval_ms: int = 1000  # push changed routes' names this often
    notify_max_load_per_cpu: float = 2.0  # run queue over twice the cores: pause pushes
    notify_max_memory_used: float = 0.95  # above this fraction of memory used, pause pushes
    max_subscriptions_per_client: int = 10_000  # route subscriptions one client may hold; 0: none
    data_dir: str = "data/nameserver"  # the brokers it served (known-brokers.json), to know when it is ready
    startup_wait_ms: int = 10_000  # after a restart, "not ready" at most this long for a broker that never returns
    controller_enable: bool = False  # run the replica-group controller in this nameserver
    controller_raft_address: str = "127.0.0.1:9878"  # this node's Raft address (fixed: peers name it)
    controller_peers: list[str] = field(default_factory=list)  # the other controller nodes' Raft addresses
    controller_data_dir: str = "data/controller"  # Raft journal and dump: the state survives restarts
    controller_broker_heartbeat_timeout_ms: int = 2500  # a master silent this long is replaced (above brokers' lease)

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
