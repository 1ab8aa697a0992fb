"""The v2 service's consumption methods (``ReceiveMessage`` and kin), for the official
SimpleConsumer and PushConsumer; the state they change is :mod:`rocketspark.grpcv2.pop`'s.

Each request is authorized as a read of the topic by the group (Sub on both, the rule of
``UPDATE_CONSUMER_OFFSET``). A receive always ends its stream with a status and a
``delivery_timestamp`` frame, as RocketMQ's proxy does: the PushConsumer needs that frame.

A lite consumer (RocketMQ 5.5, RIP-83), known by the client type of its heartbeat or settings,
is refused its receives with NOT_IMPLEMENTED: its request names no lite topic, and served as a
SimpleConsumer's it would get its bind topic's messages as if it had subscribed to them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Protocol, TypeAlias, TypeVar

from google.protobuf.message import Message
from grpc import aio

from rocketspark.errors import InvalidParameterError, RocketSparkError
from rocketspark.filtering import compile_cached
from rocketspark.grpcv2 import translate
from rocketspark.grpcv2.limits import LITE_CLIENTS, NO_LITE
from rocketspark.grpcv2.pop import Pop
from rocketspark.grpcv2.stubs import definition_pb2 as pb
from rocketspark.grpcv2.stubs import service_pb2 as sv
from rocketspark.protocol.codes import RequestCode

log = logging.getLogger(__name__)
T = TypeVar("T")
Context: TypeAlias = aio.ServicerContext[Any, Any]
MAX_WAIT_S = 30.0  # the longest a receive long-polls, whatever it asks
CLIENT_ID_HEADER = "x-mq-client-id"
MOST_LITE_CLIENTS = 10_000  # lite clients remembered (the oldest forgotten first), bounding memory


class Edge(Protocol):
    """What the consumption methods use of the endpoint: its checks and its one translation."""

    def authorize(self, context: Context, code: int, ext: dict[str, Any]) -> None: ...

    def check(self, request: Message) -> None: ...

    async def answer(
        self, request: Message, work: Callable[[], Awaitable[T]], failed: Callable[[pb.Status], T]
    ) -> T: ...

    async def route_queues(self, topic: pb.Resource) -> list[pb.MessageQueue]: ...


class Consuming:
    def __init__(self, edge: Edge, pop: Pop) -> None:
        self.edge = edge
        self.pop = pop
        self.lite_clients: dict[str, None] = {}  # client ids, in the order they were heard

    def client_type(self, client: str, kind: int) -> None:
        """What a heartbeat or the settings said the client is: a lite consumer is refused."""
        if kind in LITE_CLIENTS and client:
            self.lite_clients[client] = None
            while len(self.lite_clients) > MOST_LITE_CLIENTS:
                del self.lite_clients[next(iter(self.lite_clients))]

    def forget(self, client: str) -> None:
        self.lite_clients.pop(client, None)

    def _reader(self, context: Context, group: pb.Resource, topic: pb.Resource) -> None:
        if not group.name:
            raise translate.Refused(pb.Code.ILLEGAL_CONSUMER_GROUP, "the request names no consumer group")
        if not topic.name:
            raise InvalidParameterError("the request names no topic")
        self.edge.authorize(
            context, RequestCode.UPDATE_CONSUMER_OFFSET, {"topic": topic.name, "consumerGroup": group.name}
        )
        self.pop.heard_from(client_id(context))  # it is still there (presence)

    async def ReceiveMessage(  # noqa: N802 - the v2 service's method names
        self, request: sv.ReceiveMessageRequest, context: Context
    ) -> AsyncIterator[sv.ReceiveMessageResponse]:
        try:
            frames = await self._receive(request, context)
        except RocketSparkError as exc:
            frames = [sv.ReceiveMessageResponse(status=translate.status_for(exc))]
        except Exception as exc:  # still a status and the closing frame the clients need
            log.exception("grpc v2 endpoint: unexpected error in ReceiveMessage")
            failed = translate.status(pb.Code.INTERNAL_SERVER_ERROR, f"{type(exc).__name__}: {exc}")
            frames = [sv.ReceiveMessageResponse(status=failed)]
        for frame in frames:
            yield frame
        stamp = sv.ReceiveMessageResponse()
        stamp.delivery_timestamp.FromMilliseconds(int(time.time() * 1000))
        yield stamp

    async def _receive(self, request: sv.ReceiveMessageRequest, context: Context) -> list[sv.ReceiveMessageResponse]:
        self.edge.check(request)
        if client_id(context) in self.lite_clients:
            raise translate.Refused(pb.Code.NOT_IMPLEMENTED, f"a lite consumer's receive: {NO_LITE}")
        topic = request.message_queue.topic.name
        self._reader(context, request.group, request.message_queue.topic)
        invisible_ms = (
            request.invisible_duration.ToMilliseconds()
            if request.HasField("invisible_duration")
            else self.pop.limits.default_invisible_ms  # a PushConsumer asks for none
        )
        invisible = invisible_ms / 1000
        wait_s = request.long_polling_timeout.ToMilliseconds() / 1000 if request.HasField("long_polling_timeout") else 0
        remaining = context.time_remaining()
        if remaining is not None:  # answer before the client gives up on the call
            wait_s = min(wait_s, max(0.0, remaining - 1.0))
        received = await self.pop.receive(
            request.group.name,
            topic,
            request.message_queue.id,
            request.batch_size,
            invisible,
            min(wait_s, MAX_WAIT_S),
            *_filter(request.filter_expression),
            consumer=client_id(context),
            renew=request.auto_renew,
        )
        if not received:
            return [sv.ReceiveMessageResponse(status=translate.status(pb.Code.MESSAGE_NOT_FOUND, "no new message"))]
        frames = [sv.ReceiveMessageResponse(status=translate.status(translate.OK))]
        for inflight, name in received:
            message = translate.to_v2(inflight.message, name)
            system = message.system_properties
            system.receipt_handle = inflight.handle
            system.delivery_attempt = inflight.attempt
            system.invisible_duration.FromMilliseconds(int(invisible * 1000))
            message.topic.resource_namespace = request.message_queue.topic.resource_namespace
            frames.append(sv.ReceiveMessageResponse(message=message))
        return frames

    async def AckMessage(self, request: sv.AckMessageRequest, context: Context) -> sv.AckMessageResponse:  # noqa: N802
        async def work() -> sv.AckMessageResponse:
            self._reader(context, request.group, request.topic)
            entries = []
            for entry in request.entries:
                try:
                    self.pop.ack(request.group.name, request.topic.name, entry.receipt_handle)
                    status = translate.status(translate.OK)
                except RocketSparkError as exc:
                    status = translate.status_for(exc)
                except Exception as exc:  # the other entries still get their answer
                    log.exception("grpc v2 endpoint: unexpected error acknowledging a message")
                    status = translate.status(pb.Code.INTERNAL_SERVER_ERROR, f"{type(exc).__name__}: {exc}")
                entries.append(
                    sv.AckMessageResultEntry(
                        message_id=entry.message_id, receipt_handle=entry.receipt_handle, status=status
                    )
                )
            failed = [e.status for e in entries if e.status.code != translate.OK]
            overall = failed[0] if len(failed) == len(entries) and failed else translate.status(translate.OK)
            if failed and len(failed) < len(entries):
                overall = translate.status(pb.Code.MULTIPLE_RESULTS, f"{len(failed)} of {len(entries)} acks failed")
            return sv.AckMessageResponse(status=overall, entries=entries)

        return await self.edge.answer(request, work, lambda s: sv.AckMessageResponse(status=s))

    async def ChangeInvisibleDuration(  # noqa: N802
        self, request: sv.ChangeInvisibleDurationRequest, context: Context
    ) -> sv.ChangeInvisibleDurationResponse:
        async def work() -> sv.ChangeInvisibleDurationResponse:
            self._reader(context, request.group, request.topic)
            invisible = request.invisible_duration.ToMilliseconds() / 1000  # a nack's backoff may be short
            changed = self.pop.change_invisible(
                request.group.name, request.topic.name, request.receipt_handle, invisible
            )
            return sv.ChangeInvisibleDurationResponse(
                status=translate.status(translate.OK), receipt_handle=changed.handle
            )

        return await self.edge.answer(request, work, lambda s: sv.ChangeInvisibleDurationResponse(status=s))

    async def ForwardMessageToDeadLetterQueue(  # noqa: N802
        self, request: sv.ForwardMessageToDeadLetterQueueRequest, context: Context
    ) -> sv.ForwardMessageToDeadLetterQueueResponse:
        async def work() -> sv.ForwardMessageToDeadLetterQueueResponse:
            self._reader(context, request.group, request.topic)
            await self.pop.forward_to_dlq(request.group.name, request.topic.name, request.receipt_handle)
            return sv.ForwardMessageToDeadLetterQueueResponse(status=translate.status(translate.OK))

        return await self.edge.answer(request, work, lambda s: sv.ForwardMessageToDeadLetterQueueResponse(status=s))

    async def QueryAssignment(  # noqa: N802
        self, request: sv.QueryAssignmentRequest, context: Context
    ) -> sv.QueryAssignmentResponse:
        """Every queue of the topic, through this endpoint: the group's consumers share them
        message by message (the broker hands each out once), with no rebalance."""

        async def work() -> sv.QueryAssignmentResponse:
            self._reader(context, request.group, request.topic)
            queues = await self.edge.route_queues(request.topic)
            return sv.QueryAssignmentResponse(
                status=translate.status(translate.OK), assignments=[pb.Assignment(message_queue=q) for q in queues]
            )

        return await self.edge.answer(request, work, lambda s: sv.QueryAssignmentResponse(status=s))


def client_id(context: Context) -> str:
    """The id the official clients send with every call (``x-mq-client-id``)."""
    return str(dict(context.invocation_metadata() or ()).get(CLIENT_ID_HEADER, ""))


def _filter(expression: pb.FilterExpression) -> tuple[str | None, str | None]:
    """(tags, sql) as our pull takes them: a TAG filter ("a||b"; "*" or none: every message),
    or an SQL92 one, compiled here so a bad one is refused (ILLEGAL_FILTER_EXPRESSION) with
    where it goes wrong."""
    text = expression.expression.strip()
    if expression.type == pb.FilterType.SQL:
        compile_cached(expression.expression)
        return None, expression.expression
    return (None if text in ("", "*") else text), None
