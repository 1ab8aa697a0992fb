"""Server side of the remoting layer: a code-to-handler dispatcher on a grpc.aio server.

Brokers and nameservers register one async handler per request code. The dispatcher is the
single place where a server turns exceptions into responses (``response_for_exception``): a
rocketspark error keeps its code and message, a malformed request gets MALFORMED_REQUEST, and
anything unexpected is logged with its traceback and answered as SYSTEM_ERROR. The server
never dies of a bad request.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
from grpc import aio

from rocketspark.errors import RocketSparkError
from rocketspark.protocol import service
from rocketspark.protocol.codec import MalformedBody
from rocketspark.protocol.codes import Flag, RequestCode, ResponseCode
from rocketspark.protocol.command import MalformedCommand, RemotingCommand

log = logging.getLogger(__name__)

Handler = Callable[[RemotingCommand], Awaitable[RemotingCommand]]
StreamHandler = Callable[[RemotingCommand], AsyncIterator[RemotingCommand]]
StreamListener = Callable[[str, bool], None]
PUSH_QUEUE_LIMIT = 1024


def response_for_exception(request: RemotingCommand, exc: BaseException, server_name: str) -> RemotingCommand:
    """Translate an exception raised by a handler into the response the client receives."""
    if isinstance(exc, RocketSparkError):
        return request.response(exc.code, remark=exc.message, ext={"error": type(exc).__name__})
    if isinstance(exc, (MalformedBody, MalformedCommand)):
        return request.response(ResponseCode.MALFORMED_REQUEST, remark=f"malformed request: {exc}")
    log.exception("%s: unexpected error serving request code %s", server_name, request.code)
    return request.response(
        ResponseCode.SYSTEM_ERROR, remark=f"internal error in {server_name}: {type(exc).__name__}: {exc}"
    )


class PushHub:
    """Open server-push streams, by client id. Writes never block a handler."""

    def __init__(self) -> None:
        self._queues: dict[str, asyncio.Queue[bytes]] = {}
        self.listeners: list[StreamListener] = []
        self.dropped = 0

    @property
    def client_ids(self) -> list[str]:
        return list(self._queues)

    def is_open(self, client_id: str) -> bool:
        return client_id in self._queues

    def send(self, client_id: str, command: RemotingCommand) -> bool:
        queue = self._queues.get(client_id)
        if queue is None:
            return False
        command.flag |= Flag.ONEWAY
        try:
            queue.put_nowait(command.encode())
        except asyncio.QueueFull:
            self.dropped += 1  # a stalled client loses pushes; its periodic refresh covers them
            return False
        return True

    async def stream(self, client_id: str) -> AsyncIterator[bytes]:
        queue: asyncio.Queue[bytes] = asyncio.Queue(PUSH_QUEUE_LIMIT)
        previous = self._queues.get(client_id)
        self._queues[client_id] = queue
        if previous is None:
            self._notify(client_id, True)
        try:
            while True:
                yield await queue.get()
        finally:
            if self._queues.get(client_id) is queue:
                del self._queues[client_id]
                self._notify(client_id, False)

    def _notify(self, client_id: str, opened: bool) -> None:
        for listener in self.listeners:
            try:
                listener(client_id, opened)
            except Exception:
                log.exception("push stream listener failed")


class Dispatcher:
    """Routes each decoded request to its handler and counts requests by code."""

    def __init__(self, server_name: str) -> None:
        self.server_name = server_name
        self.handlers: dict[int, Handler] = {}
        self.stream_handlers: dict[int, StreamHandler] = {}
        self.counters: Counter[int] = Counter()
        self.push = PushHub()
        self._background: set[asyncio.Task[Any]] = set()

    def register(self, code: int, handler: Handler) -> None:
        self.handlers[int(code)] = handler

    async def invoke(self, raw: bytes, context: aio.ServicerContext[Any, Any]) -> bytes:
        try:
            request = RemotingCommand.decode(raw)
        except MalformedCommand as exc:
            self.counters[-1] += 1
            return RemotingCommand(
                ResponseCode.MALFORMED_REQUEST, flag=Flag.RESPONSE, remark=f"malformed request: {exc}"
            ).encode()
        self.counters[request.code] += 1
        handler = self.handlers.get(request.code)
        if handler is None:
            return request.response(
                ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                remark=f"request code {request.code} is not supported by {self.server_name}",
            ).encode()
        if request.is_oneway:
            task = asyncio.get_running_loop().create_task(self._run(handler, request))
            self._background.add(task)
            task.add_done_callback(self._background.discard)
            return request.response().encode()
        return (await self._run(handler, request)).encode()

    async def _run(self, handler: Handler, request: RemotingCommand) -> RemotingCommand:
        try:
            return await handler(request)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            return response_for_exception(request, exc, self.server_name)

    def register_stream(self, code: int, handler: StreamHandler) -> None:
        self.stream_handlers[int(code)] = handler

    async def stream(self, raw: bytes, context: aio.ServicerContext[Any, Any]) -> AsyncIterator[bytes]:
        """Server-streaming calls: the push channel, or a registered stream handler (pull)."""
        try:
            request = RemotingCommand.decode(raw)
        except MalformedCommand as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"malformed stream request: {exc}")
            return
        self.counters[request.code] += 1
        if request.code == RequestCode.OPEN_PUSH_STREAM:
            client_id = request.ext.get("clientId")
            if not isinstance(client_id, str) or not client_id:
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "OPEN_PUSH_STREAM needs a clientId")
                return
            async for item in self.push.stream(client_id):
                yield item
            return
        handler = self.stream_handlers.get(request.code)
        if handler is None:
            yield request.response(
                ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                remark=f"request code {request.code} cannot be streamed from {self.server_name}",
            ).encode()
            return
        try:
            async for response in handler(request):
                yield response.encode()
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            yield response_for_exception(request, exc, self.server_name).encode()

    async def channel(
        self, requests: AsyncIterator[bytes], context: aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[bytes]:
        """The multiplexed stream: every request runs as its own task (a long poll never holds
        up the requests behind it); responses go out as they are ready."""
        outbox: asyncio.Queue[bytes | None] = asyncio.Queue()
        running: set[asyncio.Task[None]] = set()

        async def serve_one(raw: bytes) -> None:
            outbox.put_nowait(await self.invoke(raw, context))

        async def read_all() -> None:
            try:
                async for raw in requests:
                    task = asyncio.get_running_loop().create_task(serve_one(raw))
                    running.add(task)
                    task.add_done_callback(running.discard)
            finally:
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


def create_server(dispatcher: Dispatcher, host: str, port: int) -> tuple[aio.Server, int]:
    """Build (not start) a grpc.aio server bound to ``host:port``; port 0 picks a free one."""
    server = aio.server(options=list(service.SERVER_OPTIONS))
    server.add_generic_rpc_handlers((dispatcher.generic_handler(),))
    bound = server.add_insecure_port(f"{host}:{port}")
    if bound == 0:
        raise OSError(f"{dispatcher.server_name} cannot listen on {host}:{port}: address in use or not available")
    return server, bound
