"""The ``apache.rocketmq.v2.MessagingService`` endpoint a broker serves on ``grpc_listen_port``.

It works as RocketMQ 5's proxy does in cluster mode: the official clients talk to it, and it
talks to the cluster through our own clients (:mod:`rocketspark.grpcv2.clients`), so it serves
every topic of the cluster, static topics included, whichever broker it runs in.
``QueryRoute`` answers with the topic's logical queues, all reached through this endpoint.

The endpoint is an edge: every request's fields are checked against their declared limits
before any work (:mod:`rocketspark.grpcv2.limits`), every error becomes the v2 ``Status`` a
client understands, in one place (``translate.status_for``), and with security on the official
clients' signature (the same ``MQv2-HMAC-SHA1`` our clients send) is checked against the
broker's users, request by request, with the permission rule of the equivalent remoting request.

Served here: routes, heartbeats, settings and transaction check-backs (``Telemetry``) and
client termination (a client that ends, or whose Telemetry stream ends for good, has what it
held made visible again: :mod:`rocketspark.grpcv2.presence`); sending (normal, FIFO, delay,
transactional, priority; recalls of delay messages) by :mod:`rocketspark.grpcv2.sending`, pop
consumption by :mod:`rocketspark.grpcv2.consuming`.
Offset-based pulls and lite topics answer NOT_IMPLEMENTED (``server``, ``limits``), with a
sentence saying what to use instead.
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from google.protobuf.message import Message
from grpc import aio

from rocketspark.errors import RocketSparkError
from rocketspark.grpcv2 import connected, settings, translate
from rocketspark.grpcv2.clients import EndpointClients, in_thread
from rocketspark.grpcv2.consuming import Consuming, client_id
from rocketspark.grpcv2.delay import DelayScheduler
from rocketspark.grpcv2.limits import Limits, PopLimits
from rocketspark.grpcv2.pop import Pop
from rocketspark.grpcv2.presence import Presence
from rocketspark.grpcv2.sending import Sending
from rocketspark.grpcv2.stubs import definition_pb2 as pb
from rocketspark.grpcv2.stubs import service_pb2 as sv
from rocketspark.grpcv2.transactions import CheckRules, Transactions
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.trace import Tracer
from rocketspark.protocol.types import MessageExt
from rocketspark.remoting.server import RequestGuard
from rocketspark.security.signing import AUTH_HEADER, DATE_HEADER

log = logging.getLogger(__name__)
T = TypeVar("T")
ACCEPTED: Final = (
    pb.MessageType.NORMAL,
    pb.MessageType.FIFO,
    pb.MessageType.DELAY,
    pb.MessageType.TRANSACTION,
    pb.MessageType.PRIORITY,
)


@dataclass(frozen=True, slots=True)
class Host:
    """What the endpoint knows of the broker it runs in."""

    broker_name: str
    master: Callable[[], bool]  # only a master's endpoint delivers delay messages and checks transactions
    topic_known: Callable[[str], bool]  # whether the broker's own topic table has a topic
    pop: PopLimits
    checks: CheckRules
    trace: Tracer  # what its consumers' receives, acks and nacks give message trace
    connections: connected.Registry | None = None  # the broker's registry of who is connected, for operators

    def is_master(self) -> bool:
        return self.master()

    def has_topic(self, topic: str) -> bool:
        return self.topic_known(topic)


@dataclass(slots=True, eq=False)  # each stream is its own (hashed by identity)
class Session:
    """A client's Telemetry stream: what it publishes, and what to tell it."""

    topics: frozenset[str]
    outbox: asyncio.Queue[sv.TelemetryCommand | None]
    loop: asyncio.AbstractEventLoop


class Endpoint:
    """The service's methods, by their v2 names (``method_handlers`` binds them, with those of
    ``consuming`` and ``sending``)."""

    def __init__(
        self,
        clients: EndpointClients,
        guard: RequestGuard | None,
        address: Callable[[], str],
        host: Host,
        delay: DelayScheduler,
        transactions: Transactions,
    ) -> None:
        self.clients = clients
        self.connections = host.connections
        self.guard = guard
        self.address = address  # host:port this endpoint is reached at (known once it is bound)
        self.host = host
        self.limits = Limits(host.pop)
        self.presence = Presence()
        pop = Pop(clients, host.pop, lambda: f"grpc-v2-endpoint@{address()}", self.presence, host.trace)
        self.consuming = Consuming(self, pop)
        self.transactions = transactions  # the broker's, which runs their rounds (shared with 4.x clients)
        self.delay = delay
        self.sending = Sending(self, clients, self.delay, self.transactions)
        self.sessions: set[Session] = set()
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        """The endpoint's background work, on the running loop: storing pop watermarks and
        releasing what gone consumers held. (Delay messages and transaction checks are the
        broker's rounds: ``broker.broker``.)"""
        for work in (
            self.consuming.pop.commit_forever(),
            self.consuming.pop.keep_forever(),
            self.consuming.pop.release_departed_forever(),
        ):
            self._tasks.append(asyncio.create_task(work))

    def ask(self, topic: str, message: MessageExt, transaction_id: str) -> bool:
        """Ask a producer of ``topic`` how a transaction ended (from a worker thread)."""
        for session in list(self.sessions):
            if topic in session.topics:
                command = sv.TelemetryCommand(
                    recover_orphaned_transaction_command=sv.RecoverOrphanedTransactionCommand(
                        message=translate.to_v2(message, topic), transaction_id=transaction_id
                    )
                )
                session.loop.call_soon_threadsafe(session.outbox.put_nowait, command)
                return True
        return False

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        self._tasks.clear()
        await self.consuming.pop.release_all()
        self.clients.close()

    # -- the edge ---------------------------------------------------------------------------

    def authorize(self, context: aio.ServicerContext[Any, Any], code: int, ext: dict[str, Any]) -> None:
        """With security on: who signed the call, and whether it may do what ``code`` does."""
        if self.guard is None:
            return
        metadata = dict(context.invocation_metadata() or ())
        request = RemotingCommand.request(
            code, {**ext, DATE_HEADER: metadata.get(DATE_HEADER), AUTH_HEADER: metadata.get(AUTH_HEADER)}
        )
        request.user = self.guard.authenticate(request)
        self.guard.authorize(request, request.user)

    def check(self, request: Message) -> None:
        """Refuse a request with a field out of its declared range (``limits``), before any work."""
        self.limits.check(request)

    async def answer(self, request: Message, work: Callable[[], Awaitable[T]], failed: Callable[[pb.Status], T]) -> T:
        """Check ``request``, then run ``work``; one of our errors becomes ``failed(status)``,
        the one translation."""
        try:
            self.check(request)
            return await work()
        except RocketSparkError as exc:
            return failed(translate.status_for(exc))
        except Exception as exc:
            log.exception("grpc v2 endpoint: unexpected error")
            return failed(translate.status(pb.Code.INTERNAL_SERVER_ERROR, f"{type(exc).__name__}: {exc}"))

    # -- routes and sessions ----------------------------------------------------------------

    async def QueryRoute(  # noqa: N802 - the v2 service's method names
        self, request: sv.QueryRouteRequest, context: aio.ServicerContext[Any, Any]
    ) -> sv.QueryRouteResponse:
        async def work() -> sv.QueryRouteResponse:
            self.authorize(context, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": request.topic.name})
            queues = await self.route_queues(request.topic)
            return sv.QueryRouteResponse(status=translate.status(translate.OK), message_queues=queues)

        return await self.answer(request, work, lambda s: sv.QueryRouteResponse(status=s))

    async def route_queues(self, topic: pb.Resource) -> list[pb.MessageQueue]:
        """The topic's logical queues, each reached through this endpoint."""
        queues = await in_thread(self.clients.admin.queues, topic.name)
        endpoints = _endpoints(self.address())
        return [
            pb.MessageQueue(
                topic=pb.Resource(name=topic.name, resource_namespace=topic.resource_namespace),
                id=queue.queue_id,
                permission=pb.Permission.READ_WRITE,
                broker=pb.Broker(name=queue.segments[-1].broker_name, id=0, endpoints=endpoints),
                accept_message_types=ACCEPTED,
            )
            for queue in queues
        ]

    async def Heartbeat(  # noqa: N802
        self, request: sv.HeartbeatRequest, context: aio.ServicerContext[Any, Any]
    ) -> sv.HeartbeatResponse:
        self.consuming.client_type(client_id(context), request.client_type)  # before a lite one is refused

        async def work() -> sv.HeartbeatResponse:
            self.authorize(context, RequestCode.GET_BROKER_CLUSTER_INFO, {})
            client = client_id(context)
            self.consuming.pop.heard_from(client)  # its auto-renewed messages stay invisible
            if self.connections is not None:
                consumer = request.client_type != pb.ClientType.PRODUCER
                group = request.group.name if consumer else ""
                connected.heartbeat(self.connections, client, _metadata(context), context.peer(), group)
            return sv.HeartbeatResponse(status=translate.status(translate.OK))

        return await self.answer(request, work, lambda s: sv.HeartbeatResponse(status=s))

    async def NotifyClientTermination(  # noqa: N802
        self, request: sv.NotifyClientTerminationRequest, context: aio.ServicerContext[Any, Any]
    ) -> sv.NotifyClientTerminationResponse:
        """A consumer ends: what it holds of its group is released (it may do so as a reader of
        that group, as for leaving it: UNREGISTER_CLIENT); a producer holds nothing."""

        async def work() -> sv.NotifyClientTerminationResponse:
            group = request.group.name
            if group:
                self.authorize(context, RequestCode.UNREGISTER_CLIENT, {"consumerGroup": group})
            else:
                self.authorize(context, RequestCode.GET_BROKER_CLUSTER_INFO, {})
            client = client_id(context)
            self.presence.terminated(client, time.monotonic())
            self.consuming.forget(client)
            if self.connections is not None:
                self.connections.gone(client)
            if group:
                self.consuming.pop.release(client, "it said it terminates", group)
            return sv.NotifyClientTerminationResponse(status=translate.status(translate.OK))

        return await self.answer(request, work, lambda s: sv.NotifyClientTerminationResponse(status=s))

    async def Telemetry(  # noqa: N802
        self, requests: AsyncIterator[sv.TelemetryCommand], context: aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[sv.TelemetryCommand]:
        """Each ``Settings`` the client sends is answered with the settings it is to use; an
        unsigned caller (with security on) gets one status saying why, and the stream ends.
        While the stream is open its client is present; its end may be the client's."""
        try:
            self.authorize(context, RequestCode.GET_BROKER_CLUSTER_INFO, {})
        except RocketSparkError as exc:
            yield sv.TelemetryCommand(status=translate.status_for(exc))
            return
        client = client_id(context)
        session = Session(frozenset(), asyncio.Queue(), asyncio.get_running_loop())
        noted = functools.partial(self._noted, client, _metadata(context), context.peer())
        reader = asyncio.create_task(self._read_telemetry(requests, session, noted, client))
        self.presence.opened(client, time.monotonic())
        try:
            while (command := await session.outbox.get()) is not None:
                yield command
        finally:
            self.presence.closed(client, time.monotonic())
            reader.cancel()
            self.sessions.discard(session)

    def _noted(self, client: str, metadata: dict[str, Any], peer: str, client_settings: pb.Settings) -> None:
        if self.connections is not None:
            connected.noted(self.connections, client, metadata, peer, client_settings)

    async def _read_telemetry(
        self,
        requests: AsyncIterator[sv.TelemetryCommand],
        session: Session,
        noted: Callable[[pb.Settings], None],
        client: str,
    ) -> None:
        """The client's side of a Telemetry stream: its settings are answered and noted for
        operators, and a producer's topics are kept (it may be asked how its transactions ended)."""
        try:
            async for command in requests:
                if not command.HasField("settings"):
                    continue
                self.consuming.client_type(client, command.settings.client_type)  # before a lite one is refused
                try:
                    self.check(command)
                except RocketSparkError as exc:  # answered, not acted on; the stream goes on
                    session.outbox.put_nowait(sv.TelemetryCommand(status=translate.status_for(exc)))
                    continue
                if command.settings.HasField("publishing"):
                    self.sessions.discard(session)
                    session.topics = frozenset(t.name for t in command.settings.publishing.topics)
                    self.sessions.add(session)
                noted(command.settings)
                answer = settings.merged(command.settings, self.clients.max_body_bytes, self.host.pop.max_attempts)
                session.outbox.put_nowait(sv.TelemetryCommand(status=translate.status(translate.OK), settings=answer))
        finally:
            session.outbox.put_nowait(None)


def _metadata(context: aio.ServicerContext[Any, Any]) -> dict[str, Any]:
    return dict(context.invocation_metadata() or ())


def _endpoints(address: str) -> pb.Endpoints:
    host, _, port = address.rpartition(":")
    try:
        scheme = pb.AddressScheme.IPv6 if ipaddress.ip_address(host).version == 6 else pb.AddressScheme.IPv4
    except ValueError:
        scheme = pb.AddressScheme.DOMAIN_NAME
    return pb.Endpoints(scheme=scheme, addresses=[pb.Address(host=host, port=int(port))])
