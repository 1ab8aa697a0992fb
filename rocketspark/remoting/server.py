"""Server side of the remoting layer: a code-to-handler dispatcher, whatever carries the requests.

Brokers and nameservers register one async handler per request code; the TCP listener
(:mod:`rocketspark.remoting.listener`) hands it each request in two steps, as its frame
arrives: ``accept`` once the header is in (known code, authenticated, the body admitted against
the in-flight budget), then ``serve`` once the body is (its shape checked, authorized, run). The dispatcher is the
single place where a server turns exceptions into responses (``response_for_exception``): a
rocketspark error keeps its code and message, a malformed request gets MALFORMED_REQUEST, and
anything unexpected is logged with its traceback and answered as SYSTEM_ERROR. The server
never dies of a bad request.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from functools import partial
from typing import Protocol, TypeVar

from rocketspark.errors import MalformedRequestError, RocketSparkError, wire_details
from rocketspark.protocol import shapes
from rocketspark.protocol.bodies import MalformedBody
from rocketspark.protocol.codes import Flag, ResponseCode
from rocketspark.protocol.command import MSGPACK, MalformedCommand, RemotingCommand
from rocketspark.protocol.headers import get_str
from rocketspark.remoting.admission import InflightBudget, Ticket
from rocketspark.security import rules

log = logging.getLogger(__name__)

Handler = Callable[[RemotingCommand], Awaitable[RemotingCommand]]
StreamHandler = Callable[[RemotingCommand], AsyncIterator[RemotingCommand]]
H = TypeVar("H", Handler, StreamHandler)


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


class Channel(Protocol):
    """The connection a request came on, as the server may use it later: to push requests to
    the client (RocketMQ's server-initiated NOTIFY_* requests) and to hear when it closes."""

    @property
    def peer(self) -> str: ...
    def push(self, command: RemotingCommand) -> bool: ...
    def on_close(self, callback: Callable[[], None]) -> None: ...


class PushHub:
    """Clients that take server-pushed requests on their connection, by client id.

    A client registers with OPEN_PUSH_STREAM (``register``, the handler), and from then on a push
    is a oneway request written to its connection (``send``): never a blocking write, and a
    client that does not read loses pushes rather than holding the server up. ``on_close``
    hears of each registration that ends with its connection. A client that registers again
    (a new connection) replaces its old one: what belongs to the client stays with its live
    connection, and the old one's close is no longer its end.
    """

    def __init__(self, on_close: Callable[[str], None] | None = None) -> None:
        self._channels: dict[str, Channel] = {}
        self.on_close = on_close

    @property
    def open_count(self) -> int:
        return len(self._channels)

    def is_open(self, client_id: str) -> bool:
        return client_id in self._channels

    def send(self, client_id: str, command: RemotingCommand) -> bool:
        """Push a oneway request; False if the client has no open connection or its
        connection's write buffer is full (its periodic route refresh covers what it missed)."""
        channel = self._channels.get(client_id)
        if channel is None:
            return False
        command.flag |= Flag.ONEWAY
        return channel.push(command)

    async def register(self, request: RemotingCommand) -> RemotingCommand:
        channel = request.channel
        if channel is None:
            raise MalformedRequestError("OPEN_PUSH_STREAM needs a connection to push to (it cannot be made in-process)")
        client_id = client_key(request)
        self._channels[client_id] = channel
        channel.on_close(partial(self._closed, client_id, channel))
        return request.response(ext={"clientId": get_str(request, "clientId")})

    def _closed(self, client_id: str, channel: Channel) -> None:
        if self._channels.get(client_id) is not channel:
            return  # replaced by a newer connection: not the client's end
        del self._channels[client_id]
        if self.on_close is not None:
            try:
                self.on_close(client_id)
            except Exception:
                log.exception("push connection close listener failed")


class RequestGuard(Protocol):
    """Who may make a request (``rocketspark.security.request_guard.Guard``): ``authenticate`` names
    the user that signed it, ``authorize`` raises unless that user may make it
    (AuthenticationError / NoPermissionError). A RocketMQ client's request is signed over its
    body too (ACL 1.0): ``claimant`` names the user it claims to be from its header, and
    ``verify_body_signature`` checks the signature once the body is in."""

    def authenticate(self, request: RemotingCommand) -> str: ...
    def authorize(self, request: RemotingCommand, user: str) -> None: ...
    def claimant(self, request: RemotingCommand) -> str: ...
    def verify_body_signature(self, request: RemotingCommand, user: str) -> None: ...
    @property
    def refusals(self) -> Mapping[str, int]:
        """Requests refused so far, by reason ("authentication", "permission"): the metrics'."""
        ...


UNSERVED = "unserved"  # the request-code label of a malformed request or a code not served


class RequestObserver(Protocol):
    """Sees every request served with its outcome (the metrics' latency histogram):
    ``protocol`` is "remoting", or "local" for a request from inside the server; ``held`` is
    the seconds a long poll held it, which are not its latency."""

    def observe_request(
        self, protocol: str, code: int | str, response_code: int | str, started: float, held: float = 0.0
    ) -> None: ...


def is_rocketmq(request: RemotingCommand) -> bool:
    """Whether a request is a RocketMQ client's (RocketMQ's JSON or binary header) rather than
    ours (msgpack): its codes mean what they mean in Apache RocketMQ, and it is served by the
    RocketMQ dialect's handlers (``rocketspark.rocketmq4``)."""
    return request.serialize != MSGPACK


class Dispatcher:
    """Routes each request to its handler and counts requests by code. With a ``guard``
    (security on), every request is authenticated and authorized before its handler; an
    ``observer`` (the server's metrics) sees each one served.

    Two tables: our own requests (msgpack headers) and RocketMQ clients' (``is_rocketmq``),
    whose handlers translate each request into ours and serve it through ``serve_translated``,
    so that one rule table (``security.rules``) and one handler decide both."""

    def __init__(
        self,
        server_name: str,
        *,
        max_inflight_bytes: int | None = None,
        guard: RequestGuard | None = None,
        observer: RequestObserver | None = None,
    ) -> None:
        self.server_name = server_name
        self.guard = guard
        self.handlers: dict[int, Handler] = {}
        self.stream_handlers: dict[int, StreamHandler] = {}
        self.rocketmq_handlers: dict[int, Handler] = {}
        self.counters: Counter[int] = Counter()
        self.budget = InflightBudget(max_inflight_bytes, server_name)
        self.observer = observer  # the server's metrics, if it has them

    def register(self, code: int, handler: Handler) -> None:
        shapes.require(code)
        rules.require(code)
        self.handlers[int(code)] = handler

    def register_stream(self, code: int, handler: StreamHandler) -> None:
        """A streaming request: its handler yields any number of responses (RocketMQ has none;
        ours, for a pull that stays open). The listener sends each with the MORE flag but the last."""
        shapes.require(code)
        rules.require(code)
        self.stream_handlers[int(code)] = handler

    def register_rocketmq(self, code: int, handler: Handler) -> None:
        """A RocketMQ client's request code: its handler checks the request's fields itself
        and authorizes what it does (``authorize``) before doing it."""
        self.rocketmq_handlers[int(code)] = handler

    # -- the two steps of a request from the wire -------------------------------------------------

    def accept(self, request: RemotingCommand, size: int) -> Ticket | RemotingCommand:
        """A request whose header has come: count it, find its handler, authenticate it (the
        signature is in the header) and admit its ``size`` (header and body) against the
        in-flight budget, all before its body is read; or the response that refuses it (its body is then dropped as
        it comes). Refusals are observed here."""
        started = time.perf_counter()
        rocketmq = is_rocketmq(request)
        if rocketmq:
            table: dict[int, Handler] | dict[int, StreamHandler] = self.rocketmq_handlers
        else:
            table = self.stream_handlers if self.is_stream(request) else self.handlers
        if request.code not in table:  # counted and labelled as one: a client cannot mint counters or series
            self.counters[-1] += 1
            remark = self._unserved(request, rocketmq)
            refused = request.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, remark=remark)
            return self._refuse(UNSERVED, refused, started)
        self.counters[request.code] += 1
        try:
            if self.guard is not None:
                request.user = self.guard.claimant(request) if rocketmq else self.guard.authenticate(request)
            return self.budget.admit(size)
        except RocketSparkError as exc:
            return self._refuse(request.code, response_for_exception(request, exc, self.server_name), started)

    def _unserved(self, request: RemotingCommand, rocketmq: bool) -> str:
        if rocketmq:
            from rocketspark.rocketmq4.codes import unserved_remark  # the dialect's table of names

            return unserved_remark(request.code, self.server_name, sorted(self.rocketmq_handlers))
        how = " as a stream" if self.is_stream(request) else ""
        return f"request code {request.code} is not supported{how} by {self.server_name}"

    async def serve(self, request: RemotingCommand, ticket: Ticket) -> RemotingCommand:
        """An accepted request, its body in: shape, authorization, handler. Its bytes leave the
        budget when the handler is done."""
        started = time.perf_counter()
        try:
            if is_rocketmq(request):
                refused = self._check_signature(request)
                handler = self.rocketmq_handlers[request.code]
            else:
                refused = self._check(request)
                handler = self.handlers[request.code]
            if refused is not None:
                return self._refuse(request.code, refused, started)
            try:  # _run, inline: one coroutine less a request
                response = await handler(request)
            except Exception as exc:  # CancelledError (a BaseException) goes through
                response = response_for_exception(request, exc, self.server_name)
        finally:
            ticket.release()
        self._observe(request.code, response, started, held=request.held)
        return response

    def open_stream(self, request: RemotingCommand, ticket: Ticket) -> AsyncIterator[RemotingCommand] | RemotingCommand:
        """An accepted streaming request: its handler's responses, or the response refusing it
        (:func:`rocketspark.remoting.streams.serve_stream` serves either)."""
        ticket.release()  # a streaming request's body is a header's worth: nothing to hold
        refused = self._check(request)
        if refused is not None:
            return refused
        return self.stream_handlers[request.code](request)

    def failed(self, request: RemotingCommand, exc: BaseException) -> RemotingCommand:
        """The response to ``request`` whose handler raised ``exc``."""
        return response_for_exception(request, exc, self.server_name)

    @staticmethod
    def is_stream(request: RemotingCommand) -> bool:
        """A request asking for a stream of responses carries the MORE flag (ours)."""
        return bool(request.flag & Flag.MORE)

    def _check_signature(self, request: RemotingCommand) -> RemotingCommand | None:
        try:
            if self.guard is not None and request.user is not None:
                self.guard.verify_body_signature(request, request.user)
        except RocketSparkError as exc:
            return response_for_exception(request, exc, self.server_name)
        return None

    def authorize(self, request: RemotingCommand, user: str | None) -> None:
        """Raise unless ``user`` may make ``request`` (one of ours, translated from a RocketMQ
        client's): its shape is checked first, as any request of ours is at the edge."""
        shapes.check(request)
        if self.guard is not None and user is not None:
            self.guard.authorize(request, user)

    async def serve_translated(self, request: RemotingCommand, user: str | None) -> RemotingCommand:
        """Serve one of our requests that a RocketMQ client's request was translated into, as
        ``user`` (who signed the original): shape, authorization, handler. Errors are raised,
        for the dialect's handler to answer in its client's terms."""
        self.authorize(request, user)
        request.user = user
        return await self.handlers[request.code](request)

    def _check(self, request: RemotingCommand) -> RemotingCommand | None:
        try:
            shapes.check(request)
            if self.guard is not None and request.user is not None:
                self.guard.authorize(request, request.user)
        except RocketSparkError as exc:
            return response_for_exception(request, exc, self.server_name)
        return None

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
        self._observe(request.code, response, started, "local", request.held)
        return response

    def _refuse(self, code: int | str, response: RemotingCommand, started: float) -> RemotingCommand:
        self._observe(code, response, started)
        return response

    def _observe(
        self, code: int | str, response: RemotingCommand, started: float, protocol: str = "remoting", held: float = 0.0
    ) -> None:
        if self.observer is not None:
            self.observer.observe_request(protocol, code, response.code, started, held)

    async def _run(self, handler: Handler, request: RemotingCommand) -> RemotingCommand:
        try:
            return await handler(request)
        except Exception as exc:  # CancelledError (a BaseException) goes through
            return response_for_exception(request, exc, self.server_name)
