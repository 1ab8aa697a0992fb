"""Broker configuration: one frozen dataclass, loaded from TOML, unknown keys rejected.

Defaults are RocketMQ's (``BrokerConfig`` / ``MessageStoreConfig``) unless noted; units are
in the names. ``conf/broker-a.toml`` lists every key with its default.

Every setting is declared here once, with its default, under the flat key a user writes. The
parts that take a subset get it as a dataclass of their own without defaults, built here
from these keys (``store_config``, ``pop_limits``, ``check_rules``, ``trace_settings``): the store's
``StoreConfig``, the v2 endpoint's ``PopLimits`` and the transaction check-back's ``CheckRules``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker.store.values import StoreConfig
from broker.trace import TraceSettings
from rocketspark import configfile
from rocketspark.errors import ConfigError
from rocketspark.grpcv2.limits import PopLimits
from rocketspark.grpcv2.transactions import CheckRules
from rocketspark.hosts import host_of, is_loopback, is_wildcard
from rocketspark.protocol.group_topics import MAX_RECONSUME_TIMES
from rocketspark.protocol.types import Perm
from rocketspark.security.settings import SecuritySettings

MiB = 1024 * 1024
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerConfig(SecuritySettings):
    broker_name: str = "broker-a"  # the broker's name, registered with nameservers; replicas of one group share it
    cluster_name: str = "DefaultCluster"  # the cluster it registers under
    listen_host: str = "127.0.0.1"  # where to listen (0.0.0.0: every interface)
    listen_port: int = 10911  # the remoting port (0 picks a free port)
    # the host registered with the nameservers, what clients connect to ("": listen_host). A broker refuses to
    # register a wildcard or loopback address with nameservers on other hosts, naming this key
    advertised_host: str = ""
    # commit log, consume queues, metadata; locked by the broker that runs on it (<data_dir>/LOCK holds its PID: a
    # second broker on it stops at once)
    data_dir: str = "data/broker-a"
    nameservers: list[str] = field(default_factory=list)  # nameserver addresses, host:port (else ROCKETSPARK_NAMESRV)
    # 6 read and write, 4 read only (admin wipe-write-perm sets it)
    broker_permission: int = Perm.READ_WRITE

    # "async": fsync every flush_interval_ms; "sync": acknowledge a send after its fsync
    flush_mode: str = "async"
    flush_interval_ms: int = 500  # with flush_mode "async": how often the store is fsynced
    sync_flush_timeout_ms: int = 5000  # with flush_mode "sync": the longest a send waits for its fsync
    segment_bytes: int = 128 * MiB  # commit-log segment size (RocketMQ: 1 GiB)
    queue_entries_per_file: int = 300_000  # consume-queue entries per file
    checkpoint_interval_ms: int = 1000  # how often the store's checkpoint and the producer table are saved
    scrub_bytes_per_s: int = 4 * MiB  # rate of the background CRC check of sealed segments (0: off)
    scrub_pause_ms: int = 60_000  # pause between two scrub passes
    retention_hours: float = 72.0  # sealed segments older than this are deleted
    retention_check_interval_ms: int = 10_000  # how often segments are checked for retention
    # above it the oldest segments are deleted first, whatever their age (diskMaxUsedSpaceRatio)
    disk_max_used_ratio: float = 0.75
    disk_refuse_writes_ratio: float = 0.90  # above it sends are refused until space is freed
    max_message_bytes: int = 4 * MiB  # larger messages are refused with a clear error
    # the largest batch record a send may carry, its section uncompressed (0: twice max_message_bytes); a batch
    # never spans two segments, so segment_bytes must be at least this plus 4 KiB
    max_batch_bytes: int = 0
    max_pull_bytes: int = 8 * MiB  # the most one pull answer carries
    max_long_poll_ms: int = 30_000  # the longest a pull may be held waiting for messages
    # request bytes the broker holds at once; past it, requests are answered SYSTEM_BUSY at once (flow control)
    max_inflight_request_bytes: int = 256 * MiB

    # a send to an unknown topic creates it (RocketMQ's default); turn it off in production
    auto_create_topic_enable: bool = True
    default_topic_queue_nums: int = 8  # queues of TBW102, the auto-create template

    register_interval_ms: int = 30_000  # re-register with every nameserver this often
    register_timeout_ms: int = 3000  # a registration's timeout
    # ask each nameserver this often whether it holds this broker's registration (QUERY_DATA_VERSION); register
    # again at once if not
    nameserver_heartbeat_interval_ms: int = 1000
    consumer_expired_ms: int = 120_000  # a consumer silent this long leaves its group
    offset_flush_interval_ms: int = 5000  # how often consumer offsets are saved
    mapping_clean_interval_ms: int = 300_000  # how often expired static-topic segments are dropped
    # index messages' keys and client ids on disk (<data_dir>/index/keys.db) for admin query-msg --key and --id
    # (offset ids are found without it; RocketMQ's messageIndexEnable)
    key_index_enable: bool = True
    # record every topic's messages' lives (sent, stored, delivered...) in RMQ_SYS_TRACE_TOPIC, for admin trace;
    # off, only topics created with --trace are (broker.trace)
    trace_enable: bool = False
    # trace events waiting to be stored hold at most this many bytes (a noted message counts its body); past it
    # new events are dropped and counted (admin counters' traceEventsDropped)
    trace_max_pending_bytes: int = 32 * MiB
    dedupe_retention_hours: float = 24.0  # how long idempotent producers (the Spark sink) are remembered

    # a replica of the group broker_name (brokers sharing broker_name, each its own replica_id), taking its role
    # from the nameservers' controller
    controller_mode: bool = False
    replica_id: int = 0  # this replica's id, unique in its group; 0-1023
    # members of the SyncStateSet (master included) that must hold a send before it is acknowledged
    in_sync_replicas: int = 1
    ha_ack_timeout_ms: int = 3000  # wait for them this long, then FLUSH_SLAVE_TIMEOUT
    ha_max_time_slave_not_catchup_ms: int = 15_000  # a slave behind this long leaves the SyncStateSet
    # the HA port the log travels to slaves on (0: any free port; slaves learn it from the master)
    ha_listen_port: int = 0
    # Prometheus /metrics over HTTP (HTTPS with tls_enable); 0: any free port (logged), -1: off
    metrics_port: int = 0
    # the RocketMQ 5 gRPC (v2) endpoint for the official clients; 0: any free port, -1: off
    grpc_listen_port: int = 0
    # the shortest invisible duration a v2 receive may ask (RocketMQ's proxy)
    pop_min_invisible_ms: int = 10_000
    pop_max_invisible_ms: int = 12 * 3_600_000  # the longest invisible duration a v2 receive may ask
    # a v2 consumer's message is delivered this many times more, then goes to the group's DLQ
    pop_max_reconsume_times: int = MAX_RECONSUME_TIMES
    # RocketMQ 4.x delay levels: what DELAY level n and the n-th retry of a failed 4.x message wait
    message_delay_level: str = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
    # a half message (v2 or 4.x transaction) this old with no outcome is checked back with a producer
    transaction_timeout_ms: int = 6000
    transaction_check_interval_ms: int = 30_000  # and checked again this often (RocketMQ's)
    transaction_check_max: int = 15  # checks before a half message is discarded with a warning
    ha_chunk_bytes: int = 1 * MiB  # the most of the log the master pushes to a slave at once
    ha_metadata_interval_ms: int = 1000  # how often a slave copies topics, mappings, offsets and producers
    controller_heartbeat_interval_ms: int = 500  # heartbeats to every nameserver's controller
    # a master acknowledges nothing this long after its last answered heartbeat was sent (keep it under the
    # controller's controller_broker_heartbeat_timeout_ms)
    master_lease_ms: int = 2000

    def __post_init__(self) -> None:
        """Refuse a configuration no broker could run with, naming the key and what it needs."""
        self.check_security(self.listen_host)
        self._check_names()
        self._check_ports()
        self._check_v2()
        self._check_sizes()
        self._check_intervals()
        self._check_replicas()
        self._check_advertised()
        if self.broker_permission & ~Perm.READ_WRITE:
            raise ConfigError("broker_permission may only combine 4 (read) and 2 (write)")

    def _check_names(self) -> None:
        if not _NAME.match(self.broker_name):
            raise ConfigError(f'broker_name "{self.broker_name}" must be 1-64 letters, digits, "_" or "-"')
        if not _NAME.match(self.cluster_name):
            raise ConfigError(f'cluster_name "{self.cluster_name}" must be 1-64 letters, digits, "_" or "-"')
        if self.flush_mode not in ("async", "sync"):
            raise ConfigError(f'flush_mode must be "async" or "sync", not "{self.flush_mode}"')

    def _check_ports(self) -> None:
        if not 0 <= self.listen_port < 65536:
            raise ConfigError(f"listen_port {self.listen_port} is not a port number (0-65535)")
        if not -1 <= self.metrics_port < 65536:
            raise ConfigError(f"metrics_port {self.metrics_port} is not a port number (0-65535), or -1 (off)")
        if not -1 <= self.grpc_listen_port < 65536:
            raise ConfigError(f"grpc_listen_port {self.grpc_listen_port} is not a port number (0-65535), or -1 (off)")

    def _check_v2(self) -> None:
        """The official clients' pop consumption and transaction check-back."""
        if not 0 < self.pop_min_invisible_ms <= self.pop_max_invisible_ms or self.pop_max_reconsume_times < 0:
            raise ConfigError(
                "pop_min_invisible_ms must be positive and at most pop_max_invisible_ms, and "
                "pop_max_reconsume_times at least 0"
            )
        if min(self.transaction_timeout_ms, self.transaction_check_interval_ms, self.transaction_check_max) <= 0:
            raise ConfigError(
                "transaction_timeout_ms, transaction_check_interval_ms and transaction_check_max must be > 0"
            )

    def _check_sizes(self) -> None:
        """Disk ratios, and sizes that must fit in one another: a message in a batch, a batch
        in a segment."""
        if not 0 < self.disk_max_used_ratio <= self.disk_refuse_writes_ratio <= 1:
            raise ConfigError(
                f"disk ratios must satisfy 0 < disk_max_used_ratio ({self.disk_max_used_ratio}) <= "
                f"disk_refuse_writes_ratio ({self.disk_refuse_writes_ratio}) <= 1"
            )
        if self.max_message_bytes <= 0 or self.max_inflight_request_bytes <= 0:
            raise ConfigError("max_message_bytes and max_inflight_request_bytes must be positive")
        if self.max_batch_bytes and self.max_batch_bytes < self.max_message_bytes + 4096:
            raise ConfigError(
                f"max_batch_bytes ({self.max_batch_bytes}) must be at least max_message_bytes "
                f"({self.max_message_bytes}) plus 4096, so that a batch of one largest message fits"
            )
        if self.segment_bytes < self.batch_limit + 4096:
            raise ConfigError(
                f"segment_bytes ({self.segment_bytes}) must be at least the batch limit ({self.batch_limit}: "
                "max_batch_bytes, or twice max_message_bytes) plus 4096, so that any batch fits in a segment"
            )

    def _check_intervals(self) -> None:
        if self.nameserver_heartbeat_interval_ms <= 0 or self.register_interval_ms <= 0:
            raise ConfigError("nameserver_heartbeat_interval_ms and register_interval_ms must be positive")
        if self.queue_entries_per_file < 1 or self.default_topic_queue_nums < 1:
            raise ConfigError("queue_entries_per_file and default_topic_queue_nums must be at least 1")

    def _check_replicas(self) -> None:
        if not 0 <= self.replica_id < 1024:
            raise ConfigError(f"replica_id {self.replica_id} must be between 0 and 1023")
        if not 0 < self.controller_heartbeat_interval_ms < self.master_lease_ms:
            raise ConfigError(
                f"controller_heartbeat_interval_ms ({self.controller_heartbeat_interval_ms}) must be positive and "
                f"below master_lease_ms ({self.master_lease_ms}), or a master's lease would run out between heartbeats"
            )
        if self.in_sync_replicas < 1:
            raise ConfigError(f"in_sync_replicas must be at least 1 (the master itself), not {self.in_sync_replicas}")
        if self.in_sync_replicas > 1 and not self.controller_mode:
            raise ConfigError(
                f"in_sync_replicas = {self.in_sync_replicas} needs replicas: set controller_mode = true and start "
                "the group's other replicas (same broker_name, their own replica_id)"
            )

    @property
    def batch_limit(self) -> int:
        """The largest batch record a send may carry: ``max_batch_bytes``, by default twice
        ``max_message_bytes`` (and room for one largest message with its header)."""
        return self.max_batch_bytes or max(2 * self.max_message_bytes, self.max_message_bytes + 4096)

    @property
    def advertised_address(self) -> str:
        """The host registered with the nameservers: ``advertised_host``; else ``listen_host``,
        or 127.0.0.1 for a wildcard one with nameservers on loopback (``_check_advertised``
        refuses the cases no client could use)."""
        if self.advertised_host:
            return self.advertised_host
        return "127.0.0.1" if is_wildcard(self.listen_host) else self.listen_host

    def _check_advertised(self) -> None:
        """A broker is reached at the address it registers: never a wildcard, and never
        loopback when its nameservers (and so its clients) are on other hosts."""
        remote = [a for a in self.nameservers if ":" in a and not is_loopback(host_of(a))]  # bad ones: named later
        if self.advertised_host and is_wildcard(self.advertised_host):
            raise ConfigError(
                f'advertised_host "{self.advertised_host}" is every interface, not an address: set it to the host '
                "name or IP address clients reach this broker at"
            )
        if not remote:
            return
        if is_wildcard(self.listen_host) and not self.advertised_host:
            raise ConfigError(
                f'listen_host "{self.listen_host}" (every interface) is no address to register with the nameservers '
                f"at {', '.join(remote)}: set advertised_host to the host name or IP address clients reach this "
                "broker at"
            )
        if not is_loopback(self.advertised_address):
            return
        raise ConfigError(
            f'this broker would register the loopback address "{self.advertised_address}" with the nameservers at '
            f"{', '.join(remote)}, which are on other hosts: their clients could not reach it. Set advertised_host "
            "to the host name or IP address clients reach this broker at (and listen_host to it, or 0.0.0.0)"
        )

    # -- the parts' settings: each part's dataclass has no defaults, these are its only source --

    def store_config(self) -> StoreConfig:
        return StoreConfig(
            path=Path(self.data_dir),
            segment_bytes=self.segment_bytes,
            queue_entries_per_file=self.queue_entries_per_file,
            flush_mode=self.flush_mode,
            flush_interval_ms=self.flush_interval_ms,
            sync_flush_timeout_ms=self.sync_flush_timeout_ms,
            retention_ms=int(self.retention_hours * 3600 * 1000),
            checkpoint_interval_ms=self.checkpoint_interval_ms,
            scrub_bytes_per_s=self.scrub_bytes_per_s,
            scrub_pause_ms=self.scrub_pause_ms,
            max_record_bytes=self.batch_limit + 65536,
        )

    def pop_limits(self) -> PopLimits:
        return PopLimits(
            min_invisible_ms=self.pop_min_invisible_ms,
            max_invisible_ms=self.pop_max_invisible_ms,
            max_reconsume_times=self.pop_max_reconsume_times,
        )

    def trace_settings(self) -> TraceSettings:
        return TraceSettings(everything=self.trace_enable, max_pending_bytes=self.trace_max_pending_bytes)

    def check_rules(self) -> CheckRules:
        return CheckRules(
            timeout_ms=self.transaction_timeout_ms,
            interval_ms=self.transaction_check_interval_ms,
            max_checks=self.transaction_check_max,
        )


def load(path: str | Path | None, **overrides: Any) -> BrokerConfig:
    """Read a TOML file (if given) and apply command-line overrides on top."""
    return configfile.load(BrokerConfig, path, overrides)
