"""Server side of the remoting layer: a code-to-handler dispatcher on a grpc.aio server.

Brokers and nameservers register one async handler per request code. The dispatcher is the
single place where a server turns exceptions into responses (``response_for_exception``): a
rocketspark error keeps its code and message, a malformed request gets MALFORMED_REQUEST, and
anything unexpected is logged with its traceback and answered as SYSTEM_ERROR. The server
never dies of a bad request.

What both servers run the same way lives here too: periodic background work (``run_every``)
and running until SIGTERM/SIGINT (``serve_until_signalled``).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import signal
import time
from collections import Counter
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from functools import partial
from typing import Any, Protocol, TypeVar

import grpc
from grpc import aio

from rocketspark.errors import MalformedRequestError, RocketSparkError, wire_details
from rocketspark.protocol import service, shapes
from rocketspark.protocol.codec import MalformedBody
from rocketspark.protocol.codes import Flag, ResponseCode
from rocketspark.protocol.command import MalformedCommand, RemotingCommand
from rocketspark.protocol.headers import get_str
from rocketspark.remoting.admission import InflightBudget, Ticket
from rocketspark.remoting.framing import Admitted, Reassembler
from rocketspark.security import rules
from rocketspark.security.tls import ServerTls

log = logging.getLogger(__name__)

Handler = Callable[[RemotingCommand], Awaitable[RemotingCommand]]
StreamHandler = Callable[[RemotingCommand], AsyncIterator[RemotingCommand]]
H = TypeVar("H", Handler, StreamHandler)
PUSH_QUEUE_LIMIT = 1024
_UNDECODED = RemotingCommand(-1)  # stands for a request that did not decode: no opaque to answer to


def response_for_exception(request: RemotingCommand, exc: BaseException, server_name: str) -> RemotingCommand:
    """Translate an exception raised by a handler into the response the client receives."""
    if isinstance(exc, RocketSparkError):
        return request.response(exc.code, remark=exc.message, ext={"error": type(exc).__name__, **wire_details(exc)})
    if isinstance(exc, (MalformedBody, MalformedCommand)):
        return request.response(ResponseCode.MALFORMED_REQUEST, remark=f"malformed request: {exc}")
    log.exception("%s: unexpected error serving request code %s", server_name, request.code)
    return request.response(
        ResponseCode.SYSTEM_ERROR, remark=f"internal error in {server_name}: {type(exc).__name__}: {exc}"
    )


def client_key(request: RemotingCommand) -> str:
    """The key a client's push stream and route subscriptions are kept under: its ``clientId``,
    within the user that signed the request when security is on, so that one user cannot take
    over (or unsubscribe) another's stream by naming its id."""
    client_id = get_str(request, "clientId")
    if not client_id:
        raise MalformedRequestError(f'request code {request.code} needs a non-empty "clientId" header field')
    return client_id if request.user is None else f"{request.user}/{client_id}"


class PushHub:
    """Open server-push streams, by client id. Writes never block a handler.

    Its ``stream`` is the OPEN_PUSH_STREAM stream handler of whichever server pushes (the
    nameserver registers it); ``on_close`` hears of each stream that ends. The stream's first
    message is the response to OPEN_PUSH_STREAM, sent once the stream is registered: from then
    on ``is_open`` is true, so a client waits for it before it asks for anything tied to the
    stream (route subscriptions). A client that reopens its stream under the same id replaces
    the old one without a close: what belongs to the client stays with its live stream.
    """

    def __init__(self) -> None:
        self._queues: dict[str, asyncio.Queue[RemotingCommand]] = {}
        self.on_close: Callable[[str], None] | None = None

    @property
    def open_count(self) -> int:
        return len(self._queues)

    def is_open(self, client_id: str) -> bool:
        return client_id in self._queues

    def send(self, client_id: str, command: RemotingCommand) -> bool:
        """Queue a push; False if the client has no stream or its queue is full (a stalled
        client loses pushes; its periodic route refresh covers them)."""
        queue = self._queues.get(client_id)
        if queue is None:
            return False
        command.flag |= Flag.ONEWAY
        try:
            queue.put_nowait(command)
        except asyncio.QueueFull:
            return False
        return True

    async def stream(self, request: RemotingCommand) -> AsyncIterator[RemotingCommand]:
        client_id = client_key(request)
        queue: asyncio.Queue[RemotingCommand] = asyncio.Queue(PUSH_QUEUE_LIMIT)
        self._queues[client_id] = queue  # a reconnecting client replaces its old stream
        try:
            yield request.response(ext={"clientId": get_str(request, "clientId")})
            while True:
                yield await queue.get()
        finally:
            if self._queues.get(client_id) is queue:
                del self._queues[client_id]
                if self.on_close is not None:
                    try:
                        self.on_close(client_id)
                    except Exception:
                        log.exception("push stream close listener failed")


class RequestGuard(Protocol):
    """Who may make a request (``rocketspark.security.guard.Guard``): ``authenticate`` names
    the user that signed it, ``authorize`` raises unless that user may make it
    (AuthenticationError / NoPermissionError)."""

    def authenticate(self, request: RemotingCommand) -> str: ...
    def authorize(self, request: RemotingCommand, user: str) -> None: ...


UNSERVED = "unserved"  # the request-code label of a malformed request or a code not served


class RequestObserver(Protocol):
    """Sees every request served with its outcome (the metrics' latency histogram):
    ``protocol`` is "remoting", or "local" for a request from inside the server."""

    def observe_request(self, protocol: str, code: int | str, response_code: int, started: float) -> None: ...


class Dispatcher:
    """Routes each decoded request to its handler and counts requests by code. With a
    ``guard`` (security on), every request is authenticated and authorized before its handler."""

    def __init__(
        self, server_name: str, *, max_inflight_bytes: int | None = None, guard: RequestGuard | None = None
    ) -> None:
        self.server_name = server_name
        self.guard = guard
        self.handlers: dict[int, Handler] = {}
        self.stream_handlers: dict[int, StreamHandler] = {}
        self.counters: Counter[int] = Counter()
        self.budget = InflightBudget(max_inflight_bytes, server_name)
        self._background: set[asyncio.Task[Any]] = set()
        self.observer: RequestObserver | None = None  # set once the server's metrics exist

    def register(self, code: int, handler: Handler) -> None:
        shapes.require(code)
        rules.require(code)
        self.handlers[int(code)] = handler

    def register_stream(self, code: int, handler: StreamHandler) -> None:
        shapes.require(code)
        rules.require(code)
        self.stream_handlers[int(code)] = handler

    def _resolve(self, raw: bytes, table: dict[int, H]) -> tuple[RemotingCommand, H] | RemotingCommand:
        """Decode and count a request, find its handler in ``table`` and check the request
        against its declared shape; or the response that refuses it (malformed, a code ``table``
        does not serve, or a field out of its shape), observed as served."""
        started = time.perf_counter()
        try:
            request = RemotingCommand.decode(raw)
        except MalformedCommand as exc:
            self.counters[-1] += 1
            return self._refuse(UNSERVED, response_for_exception(_UNDECODED, exc, self.server_name), started)
        handler = table.get(request.code)
        if handler is None:  # counted and labelled as one: a client cannot mint counters or series
            self.counters[-1] += 1
            how = "" if table is self.handlers else " as a stream"
            remark = f"request code {request.code} is not supported{how} by {self.server_name}"
            refused = request.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, remark=remark)
            return self._refuse(UNSERVED, refused, started)
        self.counters[request.code] += 1
        try:
            if self.guard is not None:
                request.user = self.guard.authenticate(request)
            shapes.check(request)
            if self.guard is not None and request.user is not None:
                self.guard.authorize(request, request.user)
        except RocketSparkError as exc:
            return self._refuse(request.code, response_for_exception(request, exc, self.server_name), started)
        return request, handler

    async def serve_local(self, request: RemotingCommand) -> RemotingCommand:
        """A request from inside this server (its own v2 endpoint, already authorized at that
        edge): no signature to check; its shape is checked and its handler answers as for any."""
        self.counters[request.code] += 1
        request.local = True
        started = time.perf_counter()
        handler = self.handlers.get(request.code)
        if handler is None:
            return request.response(
                ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                remark=f"request code {request.code} is not supported by {self.server_name}",
            )
        try:
            shapes.check(request)
            ticket = self.budget.admit(len(request.body))  # the in-flight budget counts these too
        except RocketSparkError as exc:
            return response_for_exception(request, exc, self.server_name)
        try:
            response = await self._run(handler, request)
        finally:
            ticket.release()
        self._observe(request.code, response, started, "local")
        return response

    async def invoke(self, raw: bytes, context: aio.ServicerContext[Any, Any]) -> bytes:
        admitted = self._admit(raw, len(raw))
        return admitted if isinstance(admitted, bytes) else await self._invoke_admitted(Admitted(raw, admitted))

    def _admit(self, head: bytes, size: int) -> Ticket | bytes:
        """Count a request's ``size`` bytes in flight; or the answer that refuses it (SYSTEM_BUSY
        when the budget is full), built from the request's ``head`` (its first bytes) alone."""
        try:
            return self.budget.admit(size)
        except RocketSparkError as refused:
            request = RemotingCommand.decode_head(head)
            if request is None:  # garbage is answered as garbage, not as busy
                self.counters[-1] += 1
                malformed = MalformedCommand("request head does not decode")
                return response_for_exception(_UNDECODED, malformed, self.server_name).encode()
            self.counters[request.code] += 1
            return response_for_exception(request, refused, self.server_name).encode()

    async def _invoke_admitted(self, admitted: Admitted) -> bytes:
        """Serve an admitted request; its bytes leave the budget when its handler is done.
        The wire bytes are dropped once decoded (the command holds its own copy of the body),
        so that a large request is not held twice while its handler runs."""
        ticket = admitted.ticket
        started = time.perf_counter()  # the refusals _resolve answers are observed there
        resolved = self._resolve(admitted.take(), self.handlers)
        if isinstance(resolved, RemotingCommand):
            ticket.release()
            return resolved.encode()
        request, handler = resolved
        if request.is_oneway:
            task = asyncio.get_running_loop().create_task(self._run(handler, request))
            self._background.add(task)
            task.add_done_callback(self._background.discard)
            task.add_done_callback(lambda _: ticket.release())
            return request.response().encode()
        try:
            response = await self._run(handler, request)
        finally:
            ticket.release()
        self._observe(request.code, response, started)
        return response.encode()

    def _refuse(self, code: int | str, response: RemotingCommand, started: float) -> RemotingCommand:
        self._observe(code, response, started)
        return response

    def _observe(self, code: int | str, response: RemotingCommand, started: float, protocol: str = "remoting") -> None:
        if self.observer is not None:
            self.observer.observe_request(protocol, code, response.code, started)

    async def _run(self, handler: Handler, request: RemotingCommand) -> RemotingCommand:
        try:
            return await handler(request)
        except Exception as exc:  # CancelledError (a BaseException) goes through
            return response_for_exception(request, exc, self.server_name)

    async def stream(self, raw: bytes, context: aio.ServicerContext[Any, Any]) -> AsyncIterator[bytes]:
        """Server-streaming calls (pulls, the push channel): a registered stream handler's
        responses; a failure ends the stream with its error response."""
        resolved = self._resolve(raw, self.stream_handlers)
        if isinstance(resolved, RemotingCommand):
            yield resolved.encode()
            return
        request, handler = resolved
        responses = handler(request)
        try:
            async for response in responses:
                yield response.encode()
        except Exception as exc:  # not BaseException: a client cancelling the stream is no error
            yield response_for_exception(request, exc, self.server_name).encode()
        finally:
            # When gRPC closes this stream (the client cancelled or died), the handler's own
            # clean-up runs now, not whenever its generator happens to be garbage-collected.
            if isinstance(responses, AsyncGenerator):
                await responses.aclose()

    async def channel(
        self, requests: AsyncIterator[bytes], context: aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[bytes]:
        """The multiplexed stream: every request runs as its own task (a long poll never holds
        up the requests behind it); responses go out as they are ready."""
        outbox: asyncio.Queue[bytes | None] = asyncio.Queue()
        running: set[asyncio.Task[None]] = set()

        async def serve_one(admitted: Admitted) -> None:
            outbox.put_nowait(await self._invoke_admitted(admitted))

        def release_if_cancelled(ticket: Ticket, task: asyncio.Task[None]) -> None:
            if task.cancelled():  # perhaps before it ever ran: nothing else gives the bytes back
                ticket.release()

        async def read_all() -> None:
            pieces = Reassembler(self._admit)  # admits from receipt, not from when a task runs
            try:
                async for message in requests:
                    admitted = pieces.feed(message)
                    if isinstance(admitted, bytes):
                        outbox.put_nowait(admitted)
                    elif admitted is not None:
                        task = asyncio.get_running_loop().create_task(serve_one(admitted))
                        running.add(task)
                        task.add_done_callback(running.discard)
                        task.add_done_callback(partial(release_if_cancelled, admitted.ticket))
            except MalformedCommand as exc:  # pieces that do not add up: nothing after them can be trusted
                log.warning("%s: closing a request stream: %s", self.server_name, exc)
            finally:
                pieces.close()
                if running:
                    await asyncio.gather(*running, return_exceptions=True)
                outbox.put_nowait(None)

        reader = asyncio.get_running_loop().create_task(read_all())
        try:
            while (item := await outbox.get()) is not None:
                yield item
        finally:
            reader.cancel()
            for task in list(running):
                task.cancel()

    def generic_handler(self) -> grpc.GenericRpcHandler:
        return grpc.method_handlers_generic_handler(
            service.SERVICE_NAME,
            {
                service.INVOKE: grpc.unary_unary_rpc_method_handler(self.invoke),
                service.CHANNEL: grpc.stream_stream_rpc_method_handler(self.channel),
                service.STREAM: grpc.unary_stream_rpc_method_handler(self.stream),
            },
        )


def create_server(dispatcher: Dispatcher, host: str, port: int, tls: ServerTls | None = None) -> tuple[aio.Server, int]:
    """Build (not start) a grpc.aio server bound to ``host:port``, over TLS if ``tls`` is
    given; port 0 picks a free one."""
    server = aio.server(options=list(service.SERVER_OPTIONS))
    server.add_generic_rpc_handlers((dispatcher.generic_handler(),))
    try:
        if tls is None:
            bound = server.add_insecure_port(f"{host}:{port}")
        else:
            bound = server.add_secure_port(f"{host}:{port}", tls.grpc_credentials())
    except RuntimeError:  # how grpc.aio reports a failed bind (older versions returned 0)
        bound = 0
    if bound == 0:
        raise OSError(f"{dispatcher.server_name} cannot listen on {host}:{port}: address in use or not available")
    return server, bound


async def run_every(interval_ms: int, what: str, action: Callable[[], object], logger: logging.Logger = log) -> None:
    """Run ``action`` (sync or async) every ``interval_ms`` until cancelled. A failing round is
    logged with its traceback and the next one runs: one bad round must not end the work."""
    while True:
        await asyncio.sleep(interval_ms / 1000)
        try:
            result = action()
            if inspect.isawaitable(result):
                await result
        except Exception:
            logger.exception("periodic %s failed", what)


def signal_event() -> asyncio.Event:
    """An event set by SIGTERM or SIGINT (in the main thread; elsewhere it is never set)."""
    event = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, event.set)
    return event


class _Addressed(Protocol):
    address: str


S = TypeVar("S", bound=_Addressed)
Tasks = list[asyncio.Task[None]]


async def serve_until_signalled(
    server: aio.Server,
    owner: S,
    start: Callable[[aio.Server, S], Awaitable[Tasks]],
    stop: Callable[[aio.Server, S, Tasks], Awaitable[None]],
    *,
    ready: Callable[[str], None] | None = None,
) -> None:
    """Start, announce ``owner.address`` to ``ready``, run until SIGTERM/SIGINT, then stop.

    The signal handlers go in before the readiness line: a signal sent right after it counts.
    """
    stop_requested = signal_event()
    tasks = await start(server, owner)
    if ready is not None:
        ready(owner.address)
    await stop_requested.wait()
    await stop(server, owner, tasks)
