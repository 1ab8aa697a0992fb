"""Client side of the remoting layer: sync, async and oneway calls with a deadline each.

One TCP connection per peer address (:mod:`rocketspark.remoting.connection`), opened on the
first call and shared by every thread of the client; a broken one is replaced on the next
call. Connections belong to the process that opened them: a forked child (a Spark Python
worker) gets fresh ones instead of inheriting its parent's.

This module and :mod:`rocketspark.remoting.failures` are the one place on the client where
transport failures become rocketspark errors (``transport_error``) and error responses become
exceptions (``check``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import queue
import ssl
import threading
import time
import weakref
from collections.abc import Iterator
from typing import Protocol

from rocketspark.errors import (
    ConnectError,
    RequestTimeoutError,
    RocketSparkError,
    error_for_response,
)
from rocketspark.hosts import parse_address
from rocketspark.protocol.codes import Flag, RequestCode, ResponseCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.remoting import frame
from rocketspark.remoting.closed import Closed
from rocketspark.remoting.connection import _END, Connection, Watch
from rocketspark.remoting.failures import CONNECT_TIMEOUT_S, transport_error
from rocketspark.security.signing import Credentials, Signer
from rocketspark.security.tls import ClientTls

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_MS = 3000  # RocketMQ's mqClientApiTimeout


def check(response: RemotingCommand, *ok_codes: int) -> RemotingCommand:
    """Return ``response`` if its code is SUCCESS or one of ``ok_codes``; raise otherwise."""
    if response.code == ResponseCode.SUCCESS or response.code in ok_codes:
        return response
    name = response.ext.get("error")
    raise error_for_response(response.code, response.remark, name if isinstance(name, str) else None, response.ext)


class LocalPeer(Protocol):
    """The server a client runs inside (a broker's v2 endpoint calling its own broker): its
    requests to an address it ``serves`` skip the network and the signature, and still meet
    the server's request shapes and handlers (``Dispatcher.serve_local``)."""

    def serves(self, address: str) -> bool: ...
    def submit(self, request: RemotingCommand, timeout_s: float) -> concurrent.futures.Future[RemotingCommand]: ...


class RemotingClient:
    """Calls RemotingCommands on peers by address. Thread-safe; one per client object.

    With ``credentials`` every request is signed here, the one place a request leaves (see
    :mod:`rocketspark.security.signing`)."""

    def __init__(
        self,
        *,
        peer_kind: str = "broker",
        default_timeout_ms: int = DEFAULT_TIMEOUT_MS,
        credentials: Credentials | None = None,
        tls: ClientTls | None = None,
        local: LocalPeer | None = None,
    ) -> None:
        self.peer_kind = peer_kind
        self.tls = tls
        self.default_timeout_ms = default_timeout_ms
        self.signer = Signer(credentials) if credentials is not None else None
        self._context = tls.ssl_context() if tls is not None else None
        self._connections: dict[str, Connection] = {}
        self._connecting: dict[str, threading.Lock] = {}
        self._pushes: dict[Connection, list[queue.SimpleQueue[object]]] = {}
        self._lock = threading.Lock()
        self._closed = False
        self.local = local  # the server this client runs in, called without the network
        _CLIENTS.add(self)

    @property
    def connected_peers(self) -> list[str]:
        """The addresses this client holds a connection to: opened on first call, kept until
        ``close()``; a forked child starts with none (its parent's do not work there)."""
        with self._lock:
            return [a for a, c in self._connections.items() if c.alive]

    def _forget_parent(self) -> None:
        """In a forked child: the parent's connections, threads and locks are unusable here."""
        self._lock = threading.Lock()
        self._connections = {}
        self._connecting = {}
        self._pushes = {}

    # -- connections -----------------------------------------------------------------------------

    def _connection(self, address: str, kind: str) -> Connection:
        connection = self._connections.get(address)
        if connection is not None and connection.alive:
            return connection
        host, port = parse_address(address)
        with self._lock:
            if self._closed:
                raise ConnectError(f"client is closed; cannot call {address}")
            gate = self._connecting.setdefault(address, threading.Lock())
        with gate:  # one thread connects; the others wait for its connection
            connection = self._connections.get(address)
            if connection is not None and connection.alive:
                return connection
            tls = self.tls

            def failure(cause: BaseException, answered: bool) -> RocketSparkError:
                return transport_error(cause, address, kind, tls, answered=answered)

            try:
                connection = Connection(
                    address,
                    host,
                    port,
                    context=self._context,
                    timeout_s=CONNECT_TIMEOUT_S,
                    failure=failure,
                    on_request=self._pushed,
                    on_close=self._lost,
                )
            except (OSError, ssl.SSLError, Closed) as exc:
                raise failure(exc, False) from None
            with self._lock:
                if self._closed:
                    connection.close()
                    raise ConnectError(f"client is closed; cannot call {address}")
                self._connections[address] = connection
            return connection

    def _pushed(self, command: RemotingCommand, connection: Connection) -> None:
        """A request the server wrote on a connection (in its reader thread): to the push
        streams open on it."""
        with self._lock:
            listeners = list(self._pushes.get(connection, ()))
        for listener in listeners:
            listener.put(command)

    def _lost(self, connection: Connection, error: RocketSparkError) -> None:
        with self._lock:
            if self._connections.get(connection.address) is connection:
                del self._connections[connection.address]
            listeners = self._pushes.pop(connection, [])
        for listener in listeners:
            listener.put(error)

    # -- calls -----------------------------------------------------------------------------------

    def _local_for(self, address: str) -> LocalPeer | None:
        return self.local if self.local is not None and self.local.serves(address) else None

    def _sign(self, request: RemotingCommand) -> None:
        if self.signer is not None:
            request.ext.update(self.signer.headers())

    def _submit(
        self, address: str, request: RemotingCommand, timeout_ms: int | None, peer: str | None
    ) -> concurrent.futures.Future[RemotingCommand]:
        kind = peer or self.peer_kind
        timeout_s = (timeout_ms or self.default_timeout_ms) / 1000
        local = self._local_for(address)
        if local is not None:
            return local.submit(request, timeout_s)
        self._sign(request)
        code = request.code  # the deadline heap keeps ``expire``: it must not hold the request body

        def expire() -> RocketSparkError:
            return RequestTimeoutError(
                f"{kind} at {address} did not answer request code {code} within {timeout_s:g} s", address=address
            )

        try:
            return self._connection(address, kind).submit(request, timeout_s, expire)
        except RocketSparkError as exc:
            failed: concurrent.futures.Future[RemotingCommand] = concurrent.futures.Future()
            failed.set_exception(exc)
            return failed

    def invoke(
        self,
        address: str,
        request: RemotingCommand,
        timeout_ms: int | None = None,
        *,
        peer: str | None = None,
        watch: Watch | None = None,
    ) -> RemotingCommand:
        """Sync call: wait for the response or raise at the deadline; ``watch`` as
        ``Connection.call`` takes it."""
        if self._local_for(address) is not None:
            future = self._submit(address, request, timeout_ms, peer)
            while watch is not None:  # a call to this process's own server: watched as it waits
                try:
                    return future.result(timeout=watch[0])
                except concurrent.futures.TimeoutError:
                    watch[1]()
            return future.result()
        kind = peer or self.peer_kind
        timeout_s = (timeout_ms or self.default_timeout_ms) / 1000
        self._sign(request)
        connection = self._connection(address, kind)

        def expire() -> RocketSparkError:
            return RequestTimeoutError(
                f"{kind} at {address} did not answer request code {request.code} within {timeout_s:g} s",
                address=address,
            )

        return connection.call(request, timeout_s, expire, watch)

    def invoke_async(
        self, address: str, request: RemotingCommand, timeout_ms: int | None = None, *, peer: str | None = None
    ) -> concurrent.futures.Future[RemotingCommand]:
        """Async call: a future that resolves to the response or to a translated error (a
        timeout included: it fails at its deadline even if nobody waits on it)."""
        return self._submit(address, request, timeout_ms, peer)

    async def invoke_await(
        self, address: str, request: RemotingCommand, timeout_ms: int | None = None
    ) -> RemotingCommand:
        """For code on an event loop (a broker calling its master or the controller): await
        the response, or the translated error, without blocking the loop. (Connecting, the
        first time, blocks it for at most the connect timeout.)"""
        return await asyncio.wrap_future(self._submit(address, request, timeout_ms, None))

    def invoke_oneway(self, address: str, request: RemotingCommand, timeout_ms: int | None = None) -> None:
        """Fire and forget (RocketMQ's oneway: the server sends no answer); a failure to write
        it is only logged. Once this returns the request is written: ``close`` delivers it."""
        local = self._local_for(address)
        if local is not None:
            local.submit(request, (timeout_ms or self.default_timeout_ms) / 1000)
            return
        self._sign(request)
        try:
            self._connection(address, self.peer_kind).send_oneway(request)
        except RocketSparkError as exc:
            log.debug("oneway call to %s failed: %s", address, exc)

    def invoke_stream(
        self, address: str, request: RemotingCommand, timeout_ms: int | None, *, peer: str | None = None
    ) -> ResponseStream:
        """A streaming call: iterate the responses; the deadline covers the whole stream."""
        self._sign(request)
        connection = self._connection(address, peer or self.peer_kind)
        opaque, responses = connection.open_stream(request)
        deadline = None if timeout_ms is None else time.monotonic() + timeout_ms / 1000
        return ResponseStream(self, connection, opaque, responses, deadline)

    def open_push_stream(self, address: str, client_id: str) -> PushStream:
        """Take the requests the server pushes on this client's connection (route changes):
        registers the connection as ``client_id``'s, and yields the registration's answer, then
        each pushed request, until ``cancel()`` or the connection ends (StopIteration after
        ``cancel``, the translated error when the connection broke)."""
        connection = self._connection(address, "nameserver")
        listener: queue.SimpleQueue[object] = queue.SimpleQueue()
        with self._lock:
            self._pushes.setdefault(connection, []).append(listener)
        request = RemotingCommand.request(RequestCode.OPEN_PUSH_STREAM, {"clientId": client_id})
        future = self._submit(address, request, None, "nameserver")
        return PushStream(self, connection, listener, future)

    def _stop_listening(self, connection: Connection, listener: queue.SimpleQueue[object]) -> None:
        with self._lock:
            listeners = self._pushes.get(connection)
            if listeners is not None and listener in listeners:
                listeners.remove(listener)
        listener.put(_END)

    def close(self, *, oneway_grace_s: float = 2.0) -> None:
        with self._lock:
            self._closed = True
            connections, self._connections = self._connections, {}
        for connection in connections.values():
            connection.close()


class ResponseStream(Iterator[RemotingCommand]):
    """Responses of a streaming call. Ends (StopIteration) after the last one, when cancelled,
    or at its deadline; a broken connection raises the translated error."""

    def __init__(
        self,
        client: RemotingClient,
        connection: Connection,
        opaque: int,
        responses: queue.SimpleQueue[object],
        deadline: float | None,
    ) -> None:
        self._client = client
        self._connection = connection
        self._opaque = opaque
        self._responses = responses
        self._deadline = deadline
        self._done = False

    def __next__(self) -> RemotingCommand:
        if self._done:
            raise StopIteration
        try:
            timeout = None if self._deadline is None else max(0.0, self._deadline - time.monotonic())
            item = self._responses.get(timeout=timeout)
        except queue.Empty:
            self.cancel()
            raise StopIteration from None
        if item is _END:
            self._done = True
            raise StopIteration
        if isinstance(item, RocketSparkError):
            self._done = True
            raise item
        assert isinstance(item, RemotingCommand)
        if not item.flag & Flag.MORE and item.ext.get(frame.STREAM_END_FIELD):
            self._done = True  # the server's end of the stream: no answer of its own
            raise StopIteration
        return item

    def cancel(self) -> None:
        """Stop the stream: the server ends its handler, and this iterator ends."""
        if self._done:
            return
        self._done = True
        self._connection.forget_stream(self._opaque)
        self._responses.put(_END)
        stop = RemotingCommand.request(RequestCode.STOP_STREAM, {frame.STOP_STREAM_FIELD: self._opaque})
        self._client._sign(stop)
        try:
            self._connection.send_oneway(stop)
        except RocketSparkError:
            pass  # the connection is gone: so is the stream


class PushStream(Iterator[RemotingCommand]):
    """The answer to OPEN_PUSH_STREAM, then each request the server pushes on the connection."""

    def __init__(
        self,
        client: RemotingClient,
        connection: Connection,
        listener: queue.SimpleQueue[object],
        registered: concurrent.futures.Future[RemotingCommand],
    ) -> None:
        self._client = client
        self._connection = connection
        self._listener = listener
        self._registered: concurrent.futures.Future[RemotingCommand] | None = registered

    def __next__(self) -> RemotingCommand:
        registered, self._registered = self._registered, None
        if registered is not None:
            return registered.result()
        item = self._listener.get()
        if item is _END:
            raise StopIteration
        if isinstance(item, RocketSparkError):
            raise item
        assert isinstance(item, RemotingCommand)
        return item

    def cancel(self) -> None:
        self._client._stop_listening(self._connection, self._listener)


_CLIENTS: weakref.WeakSet[RemotingClient] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for client in list(_CLIENTS):
        client._forget_parent()


os.register_at_fork(after_in_child=_after_fork_in_child)
