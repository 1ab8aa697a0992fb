"""The ``apache.rocketmq.v2.MessagingService`` endpoint a broker serves on ``grpc_listen_port``.

It works as RocketMQ 5's proxy does in cluster mode: the official clients talk to it, and it
talks to the cluster through our own client, so it serves every topic of the cluster, static
topics included, whichever broker it runs in. ``QueryRoute`` answers with the topic's
logical queues, all reached through this endpoint; a send picks the logical queue itself (by
``message_group`` for FIFO, else round robin), as the Java proxy does.

The endpoint is an edge: every error becomes the v2 ``Status`` a client understands, in one
place (``mapping.status_for``), and with security on the official clients' signature (the same
``MQv2-HMAC-SHA1`` our clients send) is checked against the broker's users, request by request,
with the permission rule of the equivalent remoting request.

Served: routes, heartbeats, settings (``Telemetry``), client termination, normal and FIFO
sends, and pop consumption (:mod:`rocketspark.grpcv2.consuming`). Delay and transactional
messages answer NOT_IMPLEMENTED with a sentence saying so.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import ipaddress
import logging
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Final, TypeVar

import grpc
from google.protobuf.message import DecodeError
from grpc import aio

from rocketspark.client.admin import Admin
from rocketspark.client.consumer import Consumer
from rocketspark.client.producer import Producer
from rocketspark.client.send_retries import RETRIABLE
from rocketspark.errors import InvalidParameterError, RequestTimeoutError, RocketSparkError
from rocketspark.grpcv2 import mapping, settings
from rocketspark.grpcv2.consuming import Consuming
from rocketspark.grpcv2.receiving import Pop, PopLimits
from rocketspark.grpcv2.stubs import definition_pb2 as pb
from rocketspark.grpcv2.stubs import service_pb2 as sv
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.types import SendResult
from rocketspark.remoting.channel import DEADLINES
from rocketspark.remoting.server import Dispatcher, RequestGuard
from rocketspark.security.settings import PeerSecurity
from rocketspark.security.signing import AUTH_HEADER, CLUSTER_ACCESS_KEY, DATE_HEADER
from rocketspark.security.tls import ServerTls

log = logging.getLogger(__name__)
T = TypeVar("T")
ACCEPTED: Final = (pb.MessageType.NORMAL, pb.MessageType.FIFO)  # what a queue takes


class Cluster:
    """The endpoint's own clients of the cluster, made on first use and signed with the
    cluster credential (the v2 caller was authorized at this edge already)."""

    def __init__(self, nameservers: list[str], security: PeerSecurity, max_body_bytes: int) -> None:
        self.nameservers = nameservers
        self.max_body_bytes = max_body_bytes  # the broker's max_message_bytes
        self.options: dict[str, Any] = {}
        if security.credentials is not None:
            self.options |= {"access_key": CLUSTER_ACCESS_KEY, "secret_key": security.credentials.secret_key}
        tls = security.client_tls
        if tls is not None:
            self.options |= {"tls": True, "tls_ca_file": tls.ca_file or None}
            if tls.cert_file:
                self.options |= {"tls_cert_file": tls.cert_file, "tls_key_file": tls.key_file}
        self._lock = threading.Lock()
        self._producer: Producer | None = None
        self._admin: Admin | None = None
        self._consumer: Consumer | None = None
        self.local: InProcess | None = None  # the broker this endpoint runs in: called without gRPC

    @property
    def producer(self) -> Producer:
        with self._lock:
            if self._producer is None:
                # No auto-create: the caller was authorized for Pub, not Create (rules.send).
                self._producer = Producer(
                    self.nameservers, max_message_bytes=self.max_body_bytes, auto_create_topics=False, **self.options
                )
                self._producer.remoting.local = self.local
            return self._producer

    @property
    def admin(self) -> Admin:
        with self._lock:
            if self._admin is None:
                self._admin = Admin(self.nameservers, **self.options)
                self._admin.remoting.local = self.local
            return self._admin

    @property
    def consumer(self) -> Consumer:
        with self._lock:
            if self._consumer is None:
                self._consumer = Consumer(self.nameservers, **self.options)
                self._consumer.remoting.local = self.local
            return self._consumer

    def close(self) -> None:
        with self._lock:
            for client in (self._producer, self._admin, self._consumer):
                if client is not None:
                    client.close()
            self._producer = self._admin = self._consumer = None


class InProcess:
    """The broker an endpoint runs in, as its clients' ``LocalPeer``: a request to it runs on
    the broker's event loop through ``Dispatcher.serve_local``, with the usual deadline."""

    def __init__(self, dispatcher: Dispatcher, loop: asyncio.AbstractEventLoop, address: Callable[[], str]) -> None:
        self.dispatcher = dispatcher
        self.loop = loop
        self.address = address

    async def call(self, request: RemotingCommand) -> RemotingCommand:
        """From the broker's own event loop: the request's answer, with no thread between."""
        return await self.dispatcher.serve_local(request)

    def submit(self, request: RemotingCommand, timeout_s: float) -> concurrent.futures.Future[RemotingCommand]:
        future = asyncio.run_coroutine_threadsafe(self.dispatcher.serve_local(request), self.loop)
        code = request.code

        def expire() -> RocketSparkError:
            return RequestTimeoutError(f"this broker did not answer request code {code} within {timeout_s:g} s")

        DEADLINES.add(time.monotonic() + timeout_s, future, expire)
        return future


class Endpoint:
    """The service's methods, by their v2 names (``method_handlers`` binds them)."""

    def __init__(
        self, cluster: Cluster, guard: RequestGuard | None, address: Callable[[], str], limits: PopLimits | None = None
    ) -> None:
        self.cluster = cluster
        self.guard = guard
        self.address = address  # host:port this endpoint is reached at (known once it is bound)
        self.consuming = Consuming(self, Pop(cluster, limits or PopLimits()))
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        """The endpoint's background work, on the running loop: storing pop watermarks."""
        self._tasks.append(asyncio.create_task(self.consuming.pop.commit_forever()))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        self._tasks.clear()
        await self.consuming.pop.commit()
        self.cluster.close()

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

    async def answer(self, work: Callable[[], Awaitable[T]], failed: Callable[[pb.Status], T]) -> T:
        """Run ``work``; one of our errors becomes ``failed(status)``, the one translation."""
        try:
            return await work()
        except RocketSparkError as exc:
            return failed(mapping.status_for(exc))
        except Exception as exc:
            log.exception("grpc v2 endpoint: unexpected error")
            return failed(mapping.status(pb.Code.INTERNAL_SERVER_ERROR, f"{type(exc).__name__}: {exc}"))

    # -- routes and sessions ----------------------------------------------------------------

    async def QueryRoute(  # noqa: N802 - the v2 service's method names
        self, request: sv.QueryRouteRequest, context: aio.ServicerContext[Any, Any]
    ) -> sv.QueryRouteResponse:
        async def work() -> sv.QueryRouteResponse:
            self.authorize(context, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": request.topic.name})
            queues = await self.route_queues(request.topic)
            return sv.QueryRouteResponse(status=mapping.status(mapping.OK), message_queues=queues)

        return await self.answer(work, lambda s: sv.QueryRouteResponse(status=s))

    async def route_queues(self, topic: pb.Resource) -> list[pb.MessageQueue]:
        """The topic's logical queues, each reached through this endpoint."""
        queues = await asyncio.to_thread(self.cluster.admin.queues, topic.name)
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
        async def work() -> sv.HeartbeatResponse:
            self.authorize(context, RequestCode.GET_BROKER_CLUSTER_INFO, {})
            return sv.HeartbeatResponse(status=mapping.status(mapping.OK))

        return await self.answer(work, lambda s: sv.HeartbeatResponse(status=s))

    async def NotifyClientTermination(  # noqa: N802
        self, request: sv.NotifyClientTerminationRequest, context: aio.ServicerContext[Any, Any]
    ) -> sv.NotifyClientTerminationResponse:
        async def work() -> sv.NotifyClientTerminationResponse:
            self.authorize(context, RequestCode.GET_BROKER_CLUSTER_INFO, {})
            return sv.NotifyClientTerminationResponse(status=mapping.status(mapping.OK))

        return await self.answer(work, lambda s: sv.NotifyClientTerminationResponse(status=s))

    async def Telemetry(  # noqa: N802
        self, requests: AsyncIterator[sv.TelemetryCommand], context: aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[sv.TelemetryCommand]:
        """Each ``Settings`` the client sends is answered with the settings it is to use; an
        unsigned caller (with security on) gets one status saying why, and the stream ends."""
        try:
            self.authorize(context, RequestCode.GET_BROKER_CLUSTER_INFO, {})
        except RocketSparkError as exc:
            yield sv.TelemetryCommand(status=mapping.status_for(exc))
            return
        async for command in requests:
            if command.HasField("settings"):
                yield sv.TelemetryCommand(
                    status=mapping.status(mapping.OK),
                    settings=settings.merged(
                        command.settings, self.cluster.max_body_bytes, self.consuming.pop.limits.max_attempts
                    ),
                )

    # -- sending ---------------------------------------------------------------------------

    async def SendMessage(  # noqa: N802
        self, request: sv.SendMessageRequest, context: aio.ServicerContext[Any, Any]
    ) -> sv.SendMessageResponse:
        async def work() -> sv.SendMessageResponse:
            if not request.messages:
                raise InvalidParameterError("the request carries no message")
            for topic in {m.topic.name for m in request.messages}:  # before any body is looked at
                self.authorize(context, RequestCode.SEND_MESSAGE, {"topic": topic})
            incoming = [mapping.to_message(m, self.cluster.max_body_bytes) for m in request.messages]
            entries = []
            for one in incoming:  # in order; at the first failure the rest are not sent
                try:
                    result = await self._send(one)
                except RocketSparkError as exc:  # the entries before it say what was stored
                    failed = mapping.status_for(exc)
                    entries.append(sv.SendResultEntry(status=failed, message_id=one.message_id))
                    return sv.SendMessageResponse(status=failed, entries=entries)
                entries.append(
                    sv.SendResultEntry(
                        status=mapping.status(mapping.OK),
                        message_id=one.message_id or result.msg_id,
                        offset=result.queue_offset,
                    )
                )
            return sv.SendMessageResponse(status=mapping.status(mapping.OK), entries=entries)

        return await self.answer(work, lambda s: sv.SendMessageResponse(status=s))

    async def _send(self, one: mapping.Incoming) -> SendResult:
        """Our producer plans the first attempt; one bound for the broker this endpoint runs in
        is handed to it on this event loop, any other goes out from a worker thread. Only a
        failure a send retries (``send_retries.RETRIABLE``: nothing was stored) is sent again,
        by our producer with its retries; any other (a flush or replica timeout: stored, maybe
        not durable yet) is the answer, as it is to a send."""
        producer, local = self.cluster.producer, self.cluster.local
        attempt = producer.first_attempt(one.message, born_ms=one.born_ms)
        if attempt is not None:
            try:
                if local is not None and attempt.address == local.address():
                    response = await local.call(attempt.request)
                else:
                    response = await asyncio.to_thread(producer.remoting.invoke, attempt.address, attempt.request)
                return producer.result_of(attempt, response)
            except RETRIABLE as exc:
                log.debug("grpc v2 endpoint: a first attempt failed (%s); sending with retries", exc)
        return await asyncio.to_thread(producer.send, one.message, born_ms=one.born_ms)

    # -- not served yet -----------------------------------------------------------------------

    def _not_yet(self, what: str) -> pb.Status:
        return mapping.status(
            pb.Code.NOT_IMPLEMENTED, f"{what} is not served by rocketspark's v2 endpoint yet (sending is)"
        )

    async def EndTransaction(self, request: Any, context: Any) -> sv.EndTransactionResponse:  # noqa: N802
        return sv.EndTransactionResponse(status=self._not_yet("transactions (EndTransaction)"))


def _endpoints(address: str) -> pb.Endpoints:
    host, _, port = address.rpartition(":")
    try:
        scheme = pb.AddressScheme.IPv6 if ipaddress.ip_address(host).version == 6 else pb.AddressScheme.IPv4
    except ValueError:
        scheme = pb.AddressScheme.DOMAIN_NAME
    return pb.Endpoints(scheme=scheme, addresses=[pb.Address(host=host, port=int(port))])


def method_handlers(*servicers: object) -> grpc.GenericRpcHandler:
    """The service's methods, taking raw bytes and parsing them here: a request that is not
    a valid protobuf is refused with INVALID_ARGUMENT naming its type, where gRPC would answer
    UNKNOWN for a failed deserializer."""
    service = sv.DESCRIPTOR.services_by_name["MessagingService"]
    handlers: dict[str, grpc.RpcMethodHandler] = {}
    for method in service.methods:
        parse = _parser(getattr(sv, method.input_type.name))
        served = [getattr(s, method.name) for s in servicers if hasattr(s, method.name)]
        call = served[0] if served else _not_served(method.name, getattr(sv, method.output_type.name))
        if method.client_streaming:
            handlers[method.name] = grpc.stream_stream_rpc_method_handler(
                _stream_stream(call, parse), response_serializer=_serialize
            )
        elif method.server_streaming:
            handlers[method.name] = grpc.unary_stream_rpc_method_handler(
                _unary_stream(call, parse), response_serializer=_serialize
            )
        else:
            handlers[method.name] = grpc.unary_unary_rpc_method_handler(
                _unary_unary(call, parse), response_serializer=_serialize
            )
    return grpc.method_handlers_generic_handler(service.full_name, handlers)


def _not_served(name: str, response: Any) -> Any:
    """A method of the service this endpoint does not serve (offset-based pulls, recalls, lite
    topics): one response whose status says so."""
    status = mapping.status(pb.Code.NOT_IMPLEMENTED, f"{name} is not served by rocketspark's v2 endpoint")

    async def unary(request: Any, context: Any) -> Any:
        return response(status=status)

    async def streaming(request: Any, context: Any) -> AsyncIterator[Any]:
        yield response(status=status)

    method = sv.DESCRIPTOR.services_by_name["MessagingService"].methods_by_name[name]
    return streaming if method.server_streaming else unary


Parse = Callable[[bytes, aio.ServicerContext[Any, Any]], Awaitable[Any]]


def _parser(cls: Any) -> Parse:
    async def parse(raw: bytes, context: aio.ServicerContext[Any, Any]) -> Any:
        try:
            return cls.FromString(raw)
        except DecodeError as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"malformed {cls.__name__}: {exc}")

    return parse


def _serialize(message: Any) -> bytes:
    data: bytes = message.SerializeToString()
    return data


def _unary_unary(call: Any, parse: Parse) -> Any:
    async def handle(raw: bytes, context: aio.ServicerContext[Any, Any]) -> Any:
        return await call(await parse(raw, context), context)

    return handle


def _unary_stream(call: Any, parse: Parse) -> Any:
    async def handle(raw: bytes, context: aio.ServicerContext[Any, Any]) -> AsyncIterator[Any]:
        async for response in call(await parse(raw, context), context):
            yield response

    return handle


def _stream_stream(call: Any, parse: Parse) -> Any:
    async def handle(raws: AsyncIterator[bytes], context: aio.ServicerContext[Any, Any]) -> AsyncIterator[Any]:
        async def requests() -> AsyncIterator[Any]:
            async for raw in raws:
                yield await parse(raw, context)

        async for response in call(requests(), context):
            yield response

    return handle


def create_server(endpoint: Endpoint, host: str, port: int, server_tls: ServerTls | None) -> tuple[aio.Server, int]:
    """Bind (not start) the v2 endpoint on ``host:port`` (0: a free port), over TLS if given."""
    # Larger requests than a message may be are still read, so that one over the limit is
    # answered MESSAGE_BODY_TOO_LARGE by the endpoint, not cut off by gRPC's 4 MiB default.
    limit = (
        4 * endpoint.cluster.max_body_bytes
    )  # room for a few messages; what a client may not send is refused by gRPC
    server = aio.server(options=[("grpc.max_receive_message_length", limit), ("grpc.max_send_message_length", limit)])
    server.add_generic_rpc_handlers((method_handlers(endpoint, endpoint.consuming),))
    address = f"{host}:{port}"
    try:
        bound = (
            server.add_insecure_port(address)
            if server_tls is None
            else server.add_secure_port(address, server_tls.grpc_credentials())
        )
    except RuntimeError:
        bound = 0
    if bound == 0:
        raise OSError(f"the grpc v2 endpoint cannot listen on {address}: address in use or not available")
    return server, bound
