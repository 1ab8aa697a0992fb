"""The v2 endpoint's gRPC server: the service's methods bound to the servicers that serve
them, each request parsed here from raw bytes (a malformed one is refused with
INVALID_ARGUMENT naming its type, where gRPC would answer UNKNOWN for a failed deserializer).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Final

import grpc
from google.protobuf.message import DecodeError
from grpc import aio

from rocketspark.grpcv2 import translate
from rocketspark.grpcv2.endpoint import Endpoint
from rocketspark.grpcv2.limits import NO_LITE
from rocketspark.grpcv2.stubs import definition_pb2 as pb
from rocketspark.grpcv2.stubs import service_pb2 as sv
from rocketspark.remoting.server import RequestObserver
from rocketspark.security.tls import ServerTls


def method_handlers(*servicers: object, observer: RequestObserver | None = None) -> grpc.GenericRpcHandler:
    """The service's methods, taking raw bytes and parsing them here: a request that is not
    a valid protobuf is refused with INVALID_ARGUMENT naming its type, where gRPC would answer
    UNKNOWN for a failed deserializer. An ``observer`` sees each unary call's latency and its
    status code (the streams, receives and Telemetry, last as long as the client waits)."""
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
                _unary_unary(call, parse, _observing(method.name, observer)), response_serializer=_serialize
            )
    return grpc.method_handlers_generic_handler(service.full_name, handlers)


# Why a method is not served, and what to use instead, where there is more to say than its name.
NOT_SERVED_WHY: Final = {"SyncLiteSubscription": NO_LITE}


def _not_served(name: str, response: Any) -> Any:
    """A method of the service this endpoint does not serve (offset-based pulls, lite topics):
    one response whose status says so."""
    why = NOT_SERVED_WHY.get(name)
    message = f"{name} is not served by rocketspark's v2 endpoint" + (f": {why}" if why else "")
    status = translate.status(pb.Code.NOT_IMPLEMENTED, message)

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


Observe = Callable[[int, float], None]


def _code_name(code: int) -> str | int:
    try:
        return str(pb.Code.Name(code))
    except ValueError:
        return code


def _observing(name: str, observer: RequestObserver | None) -> Observe:
    """Observes a unary call under its method's name and its status code's name (``SendMessage``,
    ``OK``: the metrics write them in lower snake case, as RocketMQ 5 does)."""

    def observe(code: int, started: float) -> None:
        if observer is not None:
            observer.observe_request("grpc", name, _code_name(code), started)

    return observe


def _unary_unary(call: Any, parse: Parse, observe: Observe) -> Any:
    async def handle(raw: bytes, context: aio.ServicerContext[Any, Any]) -> Any:
        started = time.perf_counter()
        try:
            response = await call(await parse(raw, context), context)
        except aio.AbortError:  # a malformed request, refused with INVALID_ARGUMENT
            observe(pb.Code.BAD_REQUEST, started)
            raise
        except Exception:  # gRPC answers UNKNOWN; the metrics count it as an internal error
            observe(pb.Code.INTERNAL_ERROR, started)
            raise
        status = getattr(response, "status", None)
        observe(int(status.code) if status is not None else 0, started)
        return response

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


def create_server(
    endpoint: Endpoint, host: str, port: int, server_tls: ServerTls | None, observer: RequestObserver | None = None
) -> tuple[aio.Server, int]:
    """Bind (not start) the v2 endpoint on ``host:port`` (0: a free port), over TLS if given."""
    # Larger requests than a message may be are still read, so that one over the limit is
    # answered MESSAGE_BODY_TOO_LARGE by the endpoint, not cut off by gRPC's 4 MiB default.
    limit = (
        4 * endpoint.clients.max_body_bytes
    )  # room for a few messages; what a client may not send is refused by gRPC
    server = aio.server(options=[("grpc.max_receive_message_length", limit), ("grpc.max_send_message_length", limit)])
    handlers = method_handlers(endpoint, endpoint.consuming, endpoint.sending, observer=observer)
    server.add_generic_rpc_handlers((handlers,))
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
