"""The broker's timer and half-message holder as 4.x requests use them: the same held logs as
the v2 endpoint's (``rocketspark.grpcv2.delay``, ``rocketspark.grpcv2.transactions``), written
through our own producer once the request is authorized here (a send to the message's topic).
"""

from __future__ import annotations

from broker.rocketmq4.context import Half
from broker.rocketmq4.queues import Queues
from rocketspark.grpcv2.clients import in_thread
from rocketspark.grpcv2.delay import DelayScheduler
from rocketspark.grpcv2.transactions import Transactions
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.types import Message, MessageExt


class BrokerHeld:
    def __init__(self, queues: Queues, delay: DelayScheduler, transactions: Transactions) -> None:
        self.queues = queues
        self.delay_scheduler = delay
        self.transactions = transactions

    async def _may_send(self, topic: str, user: str | None) -> None:
        """Held for a topic that exists (one nobody has would lose it later), by a user who may send to it."""
        self.queues.authorize(RequestCode.SEND_MESSAGE, {"topic": topic}, user)
        await in_thread(self.queues.clients.producer.publish_info, topic)

    async def delay(self, message: Message, due_ms: int, user: str | None) -> int:
        await self._may_send(message.topic, user)
        return await in_thread(self.delay_scheduler.store, message, due_ms)

    async def half(self, message: Message, user: str | None) -> Half:
        await self._may_send(message.topic, user)
        result = await in_thread(self.transactions.hold_half, message)
        return Half(result.queue_offset, result.offset_msg_id)

    async def end(self, half_offset: int, topic: str, msg_id: str, commit: bool, user: str | None) -> None:
        self.queues.authorize(RequestCode.SEND_MESSAGE, {"topic": topic}, user)
        transaction_id = self.transactions.transaction_id(half_offset)
        await in_thread(self.transactions.end, transaction_id, topic, msg_id, commit)

    def read_half(self, half_offset: int) -> MessageExt | None:
        held = self.transactions.holder.current(master_only=False)
        return None if held is None else held.read_held(half_offset)
