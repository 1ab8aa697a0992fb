"""The v2 service's sending methods: ``SendMessage`` (normal, FIFO, priority, delay and
transactional messages), ``EndTransaction`` and ``RecallMessage``.

A normal or FIFO message goes to its topic through our producer, which picks the logical queue
(by ``message_group`` for FIFO, else round robin), as RocketMQ's proxy does. A priority message
(RocketMQ 5.4, RIP-80) goes to the queue of its priority, ``min(priority, queues - 1)``, as
RocketMQ's broker puts it: pop consumers are served the highest queue first
(:mod:`rocketspark.grpcv2.pop`). A delay message whose time has not come is held by the
broker's timer (:mod:`rocketspark.grpcv2.delay`), and its send answers a recall handle that
cancels it until then (:mod:`rocketspark.grpcv2.recall`); a transactional one is a half message
until its transaction ends (:mod:`rocketspark.grpcv2.transactions`).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeAlias, TypeVar

from google.protobuf.message import Message
from grpc import aio

from rocketspark.client.producer import Producer
from rocketspark.client.send_retries import RETRIABLE
from rocketspark.errors import InvalidParameterError, RocketSparkError
from rocketspark.grpcv2 import translate
from rocketspark.grpcv2.clients import in_thread
from rocketspark.grpcv2.consuming import client_id
from rocketspark.grpcv2.delay import DelayScheduler
from rocketspark.grpcv2.recall import RecallHandle, recall
from rocketspark.grpcv2.stubs import definition_pb2 as pb
from rocketspark.grpcv2.stubs import service_pb2 as sv
from rocketspark.grpcv2.transactions import Transactions
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.command import RemotingCommand

log = logging.getLogger(__name__)
T = TypeVar("T")
Context: TypeAlias = aio.ServicerContext[Any, Any]


class Edge(Protocol):
    def authorize(self, context: Context, code: int, ext: dict[str, Any]) -> None: ...

    async def answer(
        self, request: Message, work: Callable[[], Awaitable[T]], failed: Callable[[pb.Status], T]
    ) -> T: ...


class Local(Protocol):
    """The broker the endpoint runs in, called on its own event loop."""

    def serves(self, address: str) -> bool: ...

    async def call(self, request: RemotingCommand) -> RemotingCommand: ...


class SendingClients(Protocol):
    """What sending uses of the endpoint's clients of the cluster (``clients.EndpointClients``)."""

    max_body_bytes: int

    @property
    def local(self) -> Local | None: ...

    @property
    def producer(self) -> Producer: ...


class Sending:
    def __init__(self, edge: Edge, clients: SendingClients, delay: DelayScheduler, transactions: Transactions) -> None:
        self.edge = edge
        self.clients = clients
        self.delay = delay
        self.transactions = transactions

    async def SendMessage(self, request: sv.SendMessageRequest, context: Context) -> sv.SendMessageResponse:  # noqa: N802
        async def work() -> sv.SendMessageResponse:
            if not request.messages:
                raise InvalidParameterError("the request carries no message")
            for topic in {m.topic.name for m in request.messages}:  # before any body is looked at
                self.edge.authorize(context, RequestCode.SEND_MESSAGE, {"topic": topic})
            incoming = [translate.to_message(m, self.clients.max_body_bytes) for m in request.messages]
            entries = []
            for one in incoming:  # in order; at the first failure the rest are not sent
                try:
                    entries.append(await self._send(one, client_id(context)))
                except RocketSparkError as exc:  # the entries before it say what was stored
                    failed = translate.status_for(exc)
                    entries.append(sv.SendResultEntry(status=failed, message_id=one.message_id))
                    return sv.SendMessageResponse(status=failed, entries=entries)
            return sv.SendMessageResponse(status=translate.OK_STATUS, entries=entries)

        return await self.edge.answer(request, work, lambda s: sv.SendMessageResponse(status=s))

    async def _send(self, one: translate.Incoming, sender: str) -> sv.SendResultEntry:
        """A half message or a delay message not due yet is held; any other goes to its topic.
        There our producer plans the first attempt; one bound for the broker this endpoint runs
        in is handed to it on this event loop, any other goes out from a worker thread. Only a
        failure a send retries (``send_retries.RETRIABLE``: nothing was stored) is sent again,
        by our producer with its retries; any other (a flush or replica timeout: stored, maybe
        not durable yet) is the answer, as it is to a send. The first attempt names the v5
        client for message trace (``clientId``, its ``x-mq-client-id``, and as its producer
        group the topic, as RocketMQ 5's proxy registers it), whichever broker it goes to."""
        entry = sv.SendResultEntry(status=translate.OK_STATUS, message_id=one.message_id)
        held = one.transactional or (one.deliver_at_ms is not None and one.deliver_at_ms > time.time() * 1000)
        if held:  # its topic must exist now: a message held for a topic nobody has would be lost later
            await in_thread(self.clients.producer.publish_info, one.message.topic)
        if one.transactional:
            entry.transaction_id = await in_thread(self.transactions.half, one.message)
            return entry
        if one.deliver_at_ms is not None and one.deliver_at_ms > time.time() * 1000:
            offset = await in_thread(self.delay.store, one.message, one.deliver_at_ms)
            broker = self.delay.holder.broker_name
            handle = RecallHandle(one.message.topic, broker, one.deliver_at_ms, one.message_id, offset)
            entry.recall_handle = handle.encode()
            return entry
        producer, local = self.clients.producer, self.clients.local
        if one.priority is not None:  # its queue is its priority, as far as the topic has queues
            queues = await in_thread(producer.queue_count, one.message.topic)
            one.message.queue_id = max(0, min(one.priority, queues - 1))
        result = None
        attempt = producer.first_attempt(one.message, born_ms=one.born_ms)
        if attempt is None and sender:  # the route first, so that the send names its client (message trace)
            with contextlib.suppress(RocketSparkError):  # the send below says what is wrong
                await in_thread(producer.publish_info, one.message.topic)
            attempt = producer.first_attempt(one.message, born_ms=one.born_ms)
        if attempt is not None:
            if sender:
                attempt.request.ext.update(clientId=sender, producerGroup=one.message.topic)
            try:
                if local is not None and local.serves(attempt.address):
                    response = await local.call(attempt.request)
                else:
                    response = await in_thread(producer.remoting.invoke, attempt.address, attempt.request)
                result = producer.result_of(attempt, response)
            except RETRIABLE as exc:
                log.debug("grpc v2 endpoint: a first attempt failed (%s); sending with retries", exc)
        if result is None:
            result = await in_thread(producer.send, one.message, born_ms=one.born_ms)
        entry.message_id = one.message_id or result.msg_id
        entry.offset = result.queue_offset
        return entry

    async def EndTransaction(  # noqa: N802
        self, request: sv.EndTransactionRequest, context: Context
    ) -> sv.EndTransactionResponse:
        async def work() -> sv.EndTransactionResponse:
            self.edge.authorize(context, RequestCode.SEND_MESSAGE, {"topic": request.topic.name})
            commit = request.resolution == pb.TransactionResolution.COMMIT
            await in_thread(
                self.transactions.end, request.transaction_id, request.topic.name, request.message_id, commit
            )
            return sv.EndTransactionResponse(status=translate.OK_STATUS)

        return await self.edge.answer(request, work, lambda s: sv.EndTransactionResponse(status=s))

    async def RecallMessage(  # noqa: N802
        self, request: sv.RecallMessageRequest, context: Context
    ) -> sv.RecallMessageResponse:
        """Cancel a delay message not due yet, by the recall handle its send answered."""

        async def work() -> sv.RecallMessageResponse:
            self.edge.authorize(context, RequestCode.SEND_MESSAGE, {"topic": request.topic.name})
            message_id = await in_thread(recall, self.delay, request.topic.name, request.recall_handle)
            return sv.RecallMessageResponse(status=translate.OK_STATUS, message_id=message_id)

        return await self.edge.answer(request, work, lambda s: sv.RecallMessageResponse(status=s))
