"""A broker's state: the store, the topic and offset tables, replication, the nameservers'
registration, the v2 endpoint's clients, and the background work that keeps them. Its
handlers are wired in :mod:`broker.assembly`; the process around it (bind, start, stop) is
:mod:`broker.server`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from grpc import aio

from broker.assembly import register_handlers
from broker.config import BrokerConfig
from broker.connections import Connections
from broker.consumers import ConsumerGroups
from broker.counters import BrokerCounters
from broker.dedupe import ProducerTable
from broker.diskuse import DiskUse
from broker.ha.controller_client import ControllerLink
from broker.ha.epochs import EpochFile
from broker.ha.metadata import BrokerMetadata
from broker.ha.replication import Replication
from broker.ha.role import Role
from broker.lag import Lags
from broker.longpoll import LongPollHub
from broker.metadata import BrokerFile, check_identity
from broker.metrics import BrokerCollector, BrokerReadings, flush_latency
from broker.offsets import ConsumerOffsets
from broker.registry import Registry
from broker.rocketmq4.transactions import check_back
from broker.static_cleanup import SegmentOffsets, clean_expired_segments
from broker.static_topics import StaticTopics
from broker.store.keyindex import KeyIndex
from broker.store.metafile import read_json, write_json_atomic
from broker.store.recovery import RecoveryReport
from broker.store.store import MessageStore
from broker.topics import TopicTable
from broker.trace import FLUSH_MS, TraceRecorder
from rocketspark.dirlock import DirLock
from rocketspark.grpcv2.clients import EXECUTOR, EndpointClients, InProcess
from rocketspark.grpcv2.delay import TICK_S, DelayScheduler
from rocketspark.grpcv2.endpoint import Endpoint as GrpcEndpoint
from rocketspark.grpcv2.endpoint import Host as GrpcHost
from rocketspark.grpcv2.server import create_server as bind_grpc
from rocketspark.grpcv2.transactions import Transactions
from rocketspark.metrics.node import Node, NodeMetrics
from rocketspark.protocol.types import MessageExt, Perm
from rocketspark.remoting.lifecycle import every_ms_on_loop, every_s_in_thread
from rocketspark.remoting.server import Dispatcher
from rocketspark.remoting.transport import Transport

log = logging.getLogger("broker")


class Broker:
    """Everything one broker holds; each handler module gets the pieces it uses.

    ``address`` is where it serves (its socket is bound before it is built) and ``loop`` the
    event loop it serves on: a broker built without them (a test's) is served by nobody, so
    its own clients call it over the network. ``nameserver_transport`` carries the
    registrations with the nameservers (default: a client of the registry's own); a test hands
    in a scripted nameserver to see what is registered."""

    def __init__(
        self,
        config: BrokerConfig,
        *,
        address: str = "",
        loop: asyncio.AbstractEventLoop | None = None,
        nameserver_transport: Transport | None = None,
    ) -> None:
        self.config = config
        self.name = config.broker_name
        self.cluster = config.cluster_name
        self.data_dir = Path(config.data_dir)
        self.lock = DirLock(self.data_dir, "data_dir")
        self.address = address
        self.loop = loop
        self.grpc_address = ""  # the v2 endpoint's host:port once bound (bind_v2; "" when off)
        self.grpc_server: aio.Server | None = None
        self.started_at = time.time()
        self._build_state(config)
        self._build_replication(config, nameserver_transport)
        self.trace = TraceRecorder(
            self.name, self.topics, self.dispatcher.serve_local, self.role, self.store, config.trace_settings()
        )
        self._build_v2(config)
        self.counters = BrokerCounters(
            self.dispatcher.counters,
            self.dispatcher.budget,
            self.store.stats,
            self.store.scrub_stats,
            long_polls_waiting=lambda: self.longpoll.waiting,
            duplicates_dropped=lambda: self.producers.duplicates_dropped,
            trace_dropped=lambda: self.trace.dropped,
        )
        if self.metrics is not None:
            self.metrics.add(BrokerCollector(self.metrics.families, self._readings()))
        handlers = register_handlers(self)  # kept for tests to call a handler directly
        self.send_context, self.pull_context = handlers.send, handlers.pull
        self.static_context, self.dialect = handlers.static, handlers.dialect

    def _build_state(self, config: BrokerConfig) -> None:
        """The tables and the store, the metrics (the dispatcher observes requests for them)
        and the dispatcher."""
        self.topics = TopicTable(self.data_dir / "config" / "topics.json", self.name, config.broker_permission)
        self.offsets = ConsumerOffsets(self.data_dir / "config" / "consumerOffset.json")
        self.static = StaticTopics(self.data_dir / "config" / "topicQueueMapping.json", self.name)
        self.producers = ProducerTable(self.data_dir / "config" / "producers.json", config.dedupe_retention_hours)
        self.metrics = NodeMetrics(Node(self.cluster, "broker", self.name)) if config.metrics_port >= 0 else None
        on_flush = flush_latency(self.metrics) if self.metrics is not None else None
        self.store = MessageStore(config.store_config(), accepts=self.topics.accepts, on_flush=on_flush)
        self.disk = DiskUse(self.name, self.store, config.disk_max_used_ratio, config.disk_refuse_writes_ratio)
        self.keys = KeyIndex(self.data_dir / "index" / "keys.db", self.store) if config.key_index_enable else None
        self.longpoll = LongPollHub()
        self.consumers = ConsumerGroups(config.consumer_expired_ms)
        self.connections = Connections(config.consumer_expired_ms)
        self.acl = config.acl_store(self.data_dir / "config" / "acl.json")
        self.dispatcher = Dispatcher(
            f"broker {self.name}",
            max_inflight_bytes=config.max_inflight_request_bytes,
            guard=config.guard(self.acl),
            observer=self.metrics.requests if self.metrics is not None else None,
        )

    def _build_replication(self, config: BrokerConfig, nameserver_transport: Transport | None) -> None:
        """The role, the registration with the nameservers, the copy to or from the other
        replicas and, in controller mode, the link to the controller."""
        self.role = Role(self.name, config.replica_id, config.controller_mode, config.master_lease_ms)
        self.security = config.peer_security()
        self.registry = Registry(
            config,
            self.role,
            self.registration,
            lambda: self.address,
            self.security,
            self.acl,
            version=lambda: self.topics.version,
            transport=nameserver_transport,
        )
        self.epochs = EpochFile(self.data_dir / "config" / "epochs.json")
        metadata = BrokerMetadata(
            self.topics, self.static, self.offsets, self.producers, lambda: self.store.flushed_offset, self.acl
        )
        self.replication = Replication(
            self.store,
            self.role,
            self.epochs,
            metadata,
            in_sync_replicas=config.in_sync_replicas,
            ack_timeout_ms=config.ha_ack_timeout_ms,
            max_lag_ms=config.ha_max_time_slave_not_catchup_ms,
            chunk_bytes=config.ha_chunk_bytes,
            metadata_interval_ms=config.ha_metadata_interval_ms,
            security=self.security,
        )
        self.controller = (
            ControllerLink(
                self.role,
                self.replication,
                cluster=self.cluster,
                address=lambda: self.address,
                nameservers=config.nameservers,
                interval_ms=config.controller_heartbeat_interval_ms,
                on_role_change=self._role_changed,
                security=self.security,
            )
            if config.controller_mode
            else None
        )

    def _build_v2(self, config: BrokerConfig) -> None:
        """Our own clients of the cluster (signed with the cluster credential; this broker is
        their local peer), and the held logs behind delay messages and transactions: the v2
        endpoint and 4.x clients share them."""
        local = InProcess(self.dispatcher.serve_local, self.loop, self.address)
        self.clients = EndpointClients(config.nameservers, self.security, config.max_message_bytes, local=local)
        self.host = GrpcHost(
            config.broker_name,
            lambda: self.role.is_master,
            lambda topic: self.topics.get(topic) is not None,
            config.pop_limits(),
            config.check_rules(),
            self.trace,
            self.connections,
        )
        self.delay = DelayScheduler(self.clients, self.host, self.trace)
        self.transactions = Transactions(self.clients, self.host, self.host.checks, self.trace)
        self.grpc_endpoint = (
            GrpcEndpoint(
                self.clients, self.dispatcher.guard, lambda: self.grpc_address, self.host, self.delay, self.transactions
            )
            if config.grpc_listen_port >= 0
            else None
        )

    def bind_v2(self) -> None:
        """Bind (not start) the RocketMQ 5 gRPC endpoint, unless grpc_listen_port = -1."""
        if self.grpc_endpoint is None:
            return
        config, observer = self.config, self.metrics.requests if self.metrics is not None else None
        self.grpc_server, port = bind_grpc(
            self.grpc_endpoint, config.listen_host, config.grpc_listen_port, self.security.server_tls, observer
        )
        self.grpc_address = f"{config.advertised_address}:{port}"

    def _readings(self) -> BrokerReadings:
        return BrokerReadings(
            self.store,
            Lags(self.name, self.offsets, self.static, self.store),
            self.role,
            self.replication.replica_offsets,
            self.offsets.groups,
            self.consumers.live_counts,
            lambda: len(self.topics.topics),
            lambda: self.perm,
            lambda: self.disk.refusing,
            self.dispatcher.guard,
            self.started_at,
        )

    def ask_transaction(self, topic: str, message: MessageExt, transaction_id: str) -> bool:
        """Ask a producer how a half message's transaction ended (a worker thread): a v2 client
        on its Telemetry stream, else a 4.x producer of its group."""
        if self.grpc_endpoint is not None and self.grpc_endpoint.ask(topic, message, transaction_id):
            return True
        return self.loop is not None and check_back(self.dialect, self.loop, topic, message, transaction_id)

    @property
    def perm(self) -> int:
        """The broker's permission (the topic table applies it to every topic)."""
        return self.topics.broker_perm

    # -- state ---------------------------------------------------------------------------

    def open(self) -> RecoveryReport:
        self.lock.acquire()  # before anything in data_dir is read: a second process touches nothing
        try:
            return self._open()
        except BaseException:
            self.lock.release()
            raise

    def _open(self) -> RecoveryReport:
        self.topics.load()
        if not self.topics.path.exists():
            self.topics.rebuild_lost(self.store.queue_keys_on_disk(), self.data_dir / "commitlog")
        self.offsets.load()
        self.static.load()
        self.epochs.load()
        # An epoch in the log is one this replica lived through before its restart: leading it
        # again would build on a history that may have moved on. It leads only newer ones.
        self.role.min_epoch = self.epochs.last_epoch + 1
        check_identity(self.data_dir, self.name, self.config.replica_id)
        self.producers.load()
        saved = read_json(self.data_dir / "config" / "broker.json", default={}, shape=BrokerFile)
        self.topics.broker_perm = int(saved.get("brokerPermission", self.perm))
        report = self.store.open()
        try:
            self._open_after_store()
        except BaseException:  # nothing of a failed start is left running
            if self.keys is not None:
                self.keys.close()
            self.store.close()
            raise
        return report

    def _open_after_store(self) -> None:
        """What starts once the store is open: the disk check, the key index, the producers'
        sequences replayed from the log, auto-create."""
        self.disk.refresh()
        if self.keys is not None:
            self.keys.open()
        replayed = self.producers.replay_log(self.store.records_after(self.producers.saved_upto))
        if replayed:
            log.info("broker %s: %d idempotent batches after the saved producer table replayed", self.name, replayed)
        for pid, topic, queue_id in self.producers.forget_beyond(self.store.log_max_offset):
            log.warning(
                "broker %s: producer %s's sequence on %s/%d covered records lost in recovery; its resend will be "
                "stored again",
                *(self.name, pid, topic, queue_id),
            )
        self.topics.set_auto_create(
            self.config.auto_create_topic_enable, self.config.default_topic_queue_nums, self.store.log_max_offset
        )

    def _role_changed(self) -> None:
        """A replica that took office tells the nameservers its topics at once (routes). A
        topic whose config had not reached it yet, while its messages had, is recreated from
        the copied queues, so that none of its messages is left out of the routes."""
        if self.role.is_master:
            found = self.topics.rebuild(self.store.known_queues(), missing_only=True)
            if found:
                log.warning("broker %s took office with messages of topics it had no config for: %s", self.name, found)
            self.registry.register_soon()

    def close(self) -> None:
        self.replication.close()
        if self.controller is not None:
            self.controller.close()
        self.topics.close()
        self.offsets.persist()
        if self.keys is not None:
            self.keys.close()
        self.store.close()
        self.producers.persist(self.store.flushed_offset)  # after the store flushed everything
        self.registry.close()
        self.lock.release()

    def set_permission(self, perm: int) -> None:
        self.topics.broker_perm = perm
        write_json_atomic(self.data_dir / "config" / "broker.json", {"brokerPermission": perm})

    def registration(self, only: list[str] | None = None) -> dict[str, Any]:
        """What the nameservers learn about this broker: everything, or (``only``) just those
        topics, as an increment that leaves the nameserver's view of the others alone
        (RocketMQ's ``registerIncrementBrokerData``: a new topic costs the same however many
        the broker has)."""
        configs = self.topics.configs() if only is None else [c for t in only if (c := self.topics.get(t))]
        details = self.static.details.values() if only is None else [d for t in only if (d := self.static.get(t))]
        registration = {
            "cluster": self.cluster,
            "broker": self.name,
            "addr": self.address,
            "perm": self.perm,
            "version": self.topics.version,
            "topics": [{**c.to_wire(), "perm": c.perm & (self.perm | Perm.INHERIT)} for c in configs],
            "static": [d.to_wire() for d in details],
        }
        if only is not None:
            registration["incremental"] = True
        return registration

    def runtime_info(self) -> dict[str, Any]:
        counted = self.counters.to_wire()
        return {
            "brokerName": self.name,
            "cluster": self.cluster,
            "address": self.address,
            "perm": Perm.describe(self.perm),
            "uptimeS": int(time.time() - self.started_at),
            "topics": len(self.topics.topics),
            "logMinOffset": self.store.log_min_offset,
            "logMaxOffset": self.store.log_max_offset,
            "logFlushedOffset": self.store.flushed_offset,
            "segments": self.store.log_segments,
            "diskBytes": self.store.disk_usage(),
            "messagesStored": counted["messagesStored"],
            "bytesStored": counted["bytesStored"],
            "flushMode": self.config.flush_mode,
            "nameservers": self.config.nameservers,
            "metricsUrl": self.metrics.url if self.metrics is not None else "",  # "" until served, or off
        }

    # -- background work -------------------------------------------------------------------

    async def _every(self, interval_ms: int, what: str, action: Callable[[], object]) -> None:
        await every_ms_on_loop(interval_ms, f"{what} of broker {self.name}", action, log)

    def background_tasks(self) -> list[Coroutine[Any, Any, None]]:
        return [
            *([self.controller.run()] if self.controller is not None else []),
            self.registry.run(),
            self.registry.watch(),
            self._every(self.config.offset_flush_interval_ms, "offset persist", self.offsets.save),
            self._every(self.config.checkpoint_interval_ms, "producer table persist", self.save_producers),
            self._every(self.config.retention_check_interval_ms, "retention", self.apply_retention),
            self._every(1000, "disk check", self.disk.refresh),
            self._every(FLUSH_MS, "message trace flush", self.trace.flush),
            self._every(self.config.mapping_clean_interval_ms, "static segment cleanup", self.clean_mappings),
            every_s_in_thread(
                TICK_S, self.delay.step, f"delivering delay messages of broker {self.name}", log, EXECUTOR
            ),
            every_s_in_thread(
                min(1.0, self.config.transaction_check_interval_ms / 2000),
                lambda: self.transactions.step(self.ask_transaction),
                f"broker {self.name}: checking transactions",
                log,
                EXECUTOR,
            ),
        ]

    def apply_retention(self) -> None:
        self.store.delete_expired(blocking=False)  # skipped while the flusher holds the store
        self.disk.make_room()

    async def save_producers(self) -> None:
        await self.producers.save(self.store.flushed_offset)

    async def clean_mappings(self) -> None:
        sources = SegmentOffsets(self.name, self.store, self.registry.client, self.config.nameservers)
        dropped = await clean_expired_segments(self.static, sources)
        if dropped:
            await self.registry.register_now(dropped)  # named: their subscribers hear of it
