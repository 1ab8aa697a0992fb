"""How a broker's parts are handed to its request handlers: each handler module gets the
narrow pieces it uses (its context), and the RocketMQ 4.x dialect's handlers theirs.

``Parts`` declares what this wiring reads of the broker, part by part; nothing here keeps the
broker itself.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from broker import rocketmq4
from broker.config import BrokerConfig
from broker.connections import Connections
from broker.consumers import ConsumerGroups
from broker.counters import BrokerCounters
from broker.dedupe import ProducerTable
from broker.diskuse import DiskUse
from broker.ha.epochs import EpochFile
from broker.ha.replication import Replication
from broker.ha.role import Role
from broker.handlers import admin, connections, consumers, ha, lookup, offsets, pull, send, static
from broker.longpoll import LongPollHub
from broker.offsets import ConsumerOffsets
from broker.registry import Registry
from broker.rocketmq4.context import Dialect
from broker.rocketmq4.filters import Filters
from broker.rocketmq4.held import BrokerHeld
from broker.rocketmq4.members import Members
from broker.rocketmq4.messages import DelayLevels, mint_client_id
from broker.rocketmq4.queues import Queues
from broker.static_topics import StaticTopics
from broker.store.keyindex import KeyIndex
from broker.store.store import MessageStore
from broker.topics import TopicTable
from broker.trace import TraceRecorder
from rocketspark.grpcv2.clients import EndpointClients
from rocketspark.grpcv2.delay import DelayScheduler
from rocketspark.grpcv2.transactions import Transactions
from rocketspark.remoting.server import Dispatcher
from rocketspark.security.service import serve_acl
from rocketspark.security.store import AclStore


class Parts(Protocol):
    """What the handlers are given of a broker (``broker.broker.Broker`` has them all)."""

    name: str
    config: BrokerConfig
    address: str
    topics: TopicTable
    offsets: ConsumerOffsets
    static: StaticTopics
    producers: ProducerTable
    store: MessageStore
    disk: DiskUse
    keys: KeyIndex | None
    longpoll: LongPollHub
    consumers: ConsumerGroups
    connections: Connections
    acl: AclStore
    dispatcher: Dispatcher
    role: Role
    registry: Registry
    epochs: EpochFile
    replication: Replication
    clients: EndpointClients
    delay: DelayScheduler
    transactions: Transactions
    counters: BrokerCounters
    trace: TraceRecorder

    def runtime_info(self) -> dict[str, Any]: ...
    def set_permission(self, perm: int) -> None: ...


@dataclass(frozen=True, slots=True)
class Handlers:
    """The contexts a test calls a handler with directly, and the 4.x dialect's."""

    send: send.SendContext
    pull: pull.PullContext
    static: static.StaticContext
    dialect: Dialect


def register_handlers(b: Parts) -> Handlers:
    """Register every request the broker serves on its dispatcher."""
    address: Callable[[], str] = lambda: b.address  # noqa: E731  # known once the port is bound
    store, topics, static_, role, registry, longpoll = b.store, b.topics, b.static, b.role, b.registry, b.longpoll
    send_context = send.SendContext(
        b.name,
        b.config,
        topics,
        static_,
        store,
        b.producers,
        longpoll,
        role,
        b.replication,
        registry,
        b.disk,
        address,
        b.trace,
        b.connections,
    )
    pull_context = pull.PullContext(b.config, topics, static_, store, longpoll, b.trace)
    static_context = static.StaticContext(b.name, topics, static_, store, longpoll, role, registry, b.producers)
    admin_context = admin.AdminContext(
        b.name,
        role,
        topics,
        static_,
        store,
        b.offsets,
        longpoll,
        registry,
        b.counters,
        b.runtime_info,
        b.set_permission,
    )
    d = b.dispatcher
    send.register(d, send_context)
    pull.register(d, pull_context)
    offsets.register(d, offsets.OffsetsContext(topics, store, b.offsets, role, static_, b.consumers, b.trace))
    consumers.register(
        d, consumers.ConsumersContext(b.consumers, topics, store, role, registry, b.offsets, b.connections)
    )
    connections.register(d, b.connections)
    lookup.register(d, lookup.LookupContext(b.name, topics, static_, store, b.keys, address))
    admin.register(d, admin_context)
    static.register(d, static_context)
    ha.register(d, ha.HaContext(role, store, b.epochs, b.replication))
    serve_acl(d, b.acl, enabled=b.config.auth_enable)
    dialect = _dialect(b, address)
    rocketmq4.register(d, dialect)
    return Handlers(send_context, pull_context, static_context, dialect)


def _dialect(b: Parts, address: Callable[[], str]) -> Dialect:
    """The 4.x dialect's handlers: each request translated into ours, static topics served
    through the broker's own clients of the cluster."""
    queues = Queues(b.name, b.dispatcher, b.static, b.clients, address)
    return Dialect(
        b.name,
        b.config,
        b.dispatcher,
        queues,
        Members(b.consumers),
        b.consumers,
        b.connections,
        b.store,
        BrokerHeld(queues, b.delay, b.transactions),
        Filters(),
        DelayLevels(b.config.message_delay_level),
        mint_client_id,
        b.trace,
        lambda topic: b.topics.get(topic) is not None,
    )
