"""What the RocketMQ 4.x dialect's handlers touch of their broker."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from broker.config import BrokerConfig
from broker.connections import Connections
from broker.consumers import ConsumerGroups
from broker.rocketmq4.filters import Filters
from broker.rocketmq4.members import Members
from broker.rocketmq4.messages import DelayLevels
from broker.rocketmq4.queues import Queues
from broker.store.store import MessageStore
from rocketspark.protocol.trace import Tracer
from rocketspark.protocol.types import Message, MessageExt
from rocketspark.remoting.server import Dispatcher


@dataclass(frozen=True, slots=True)
class Half:
    """Where a half message is held: its offset in the half topic, and its offset id."""

    queue_offset: int
    offset_msg_id: str


class Held(Protocol):
    """The broker's timer and half-message holder (shared with the v2 endpoint)."""

    async def delay(self, message: Message, due_ms: int, user: str | None) -> int: ...
    async def half(self, message: Message, user: str | None) -> Half: ...
    async def end(self, half_offset: int, topic: str, msg_id: str, commit: bool, user: str | None) -> None: ...
    def read_half(self, half_offset: int) -> MessageExt | None: ...


@dataclass(frozen=True, slots=True)
class Dialect:
    name: str  # this broker's
    config: BrokerConfig
    dispatcher: Dispatcher
    queues: Queues
    members: Members
    groups: ConsumerGroups
    connections: Connections  # who is connected, for operators
    store: MessageStore
    held: Held
    filters: Filters
    delay_levels: DelayLevels
    mint_id: Callable[[], str]
    trace: Tracer  # what 4.x clients did that message trace records (send-backs)
    topic_exists: Callable[
        [str], bool
    ]  # in this broker's topic table  # a client id (UNIQ_KEY) for a message sent without one
