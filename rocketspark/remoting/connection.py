"""One client connection to one server: RocketMQ's remoting frames over a TCP socket.

Every thread of a client shares it. A request is written from the caller's own thread (under
a lock, straight to the socket: no hand-off on the way out) and its answer is read by the
connection's reader thread, which settles the caller's future (the one hand-off on the way
back). Requests are matched to responses by ``opaque``, unique on the connection. The server
may write requests of its own on it (route-change pushes); those go to ``on_request``, in the
reader thread: it must only hand them on (to a queue), never call the server itself.

With TLS the socket carries an ``ssl.SSLObject`` over memory buffers (``wrap_bio``): both
threads use one TLS session under one lock, which Python's ``SSLSocket`` does not allow.

If the connection breaks, every request waiting on it fails with the translated error and the
next request opens a new connection. This module raises transport errors as they come; the
client (:mod:`rocketspark.remoting.client`) turns them into rocketspark errors.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import queue
import socket
import ssl
import threading
import time
from collections.abc import Callable
from typing import Final

from rocketspark.errors import RocketSparkError
from rocketspark.protocol.codes import Flag
from rocketspark.protocol.command import MalformedCommand, RemotingCommand
from rocketspark.remoting import frame
from rocketspark.remoting.deadlines import DEADLINES, Expire

READ_BYTES: Final = 256 * 1024
_END = object()  # a stream's end, queued after its last response

Failure = Callable[[BaseException, bool], RocketSparkError]  # (cause, answered before) -> what callers get


class Closed(ConnectionError):
    """The connection ended (the peer closed it, or it was closed here)."""


class _Tls:
    """A TLS session over memory buffers: encrypt what is written, decrypt what is read."""

    def __init__(self, sock: socket.socket, context: ssl.SSLContext, host: str, timeout_s: float) -> None:
        self.sock = sock
        self.incoming = ssl.MemoryBIO()
        self.outgoing = ssl.MemoryBIO()
        self.session = context.wrap_bio(self.incoming, self.outgoing, server_hostname=host)
        self.lock = threading.Lock()
        sock.settimeout(timeout_s)
        while True:
            try:
                self.session.do_handshake()
                break
            except ssl.SSLWantReadError:
                self._flush()
                data = sock.recv(READ_BYTES)
                if not data:
                    raise Closed("the server closed the connection during the TLS handshake") from None
                self.incoming.write(data)
        self._flush()
        sock.settimeout(None)

    def _flush(self) -> None:
        data = self.outgoing.read()
        if data:
            self.sock.sendall(data)

    def encrypt(self, parts: list[bytes]) -> bytes:
        with self.lock:
            for part in parts:
                self.session.write(part)
            return self.outgoing.read()

    def decrypt(self, data: bytes) -> bytes:
        """Plain bytes from what was received (and any TLS bytes the session must send back,
        returned by ``pending``)."""
        with self.lock:
            if data:
                self.incoming.write(data)
            else:
                self.incoming.write_eof()
            out = bytearray()
            while True:
                try:
                    chunk = self.session.read(READ_BYTES)
                except ssl.SSLWantReadError:
                    break
                except ssl.SSLZeroReturnError:
                    break
                if not chunk:
                    break
                out += chunk
            return bytes(out)

    def pending(self) -> bytes:
        with self.lock:
            return self.outgoing.read()


class Waiter:
    """A synchronous call's answer: the caller blocks on a lock that the reader releases, the
    cheapest hand-off between two threads CPython has (a Future adds a condition, callbacks
    and a deadline entry, for a caller that waits anyway). Settled once: only whoever takes it
    out of the pending table settles it."""

    __slots__ = ("_gate", "error", "result")

    def __init__(self) -> None:
        self._gate = threading.Lock()
        self._gate.acquire()
        self.result: RemotingCommand | None = None
        self.error: BaseException | None = None

    def set_result(self, result: RemotingCommand) -> None:
        self.result = result
        self._gate.release()

    def set_exception(self, error: BaseException) -> None:
        self.error = error
        self._gate.release()

    def done(self) -> bool:
        return False  # it leaves the pending table as it is settled

    def wait(self, timeout_s: float | None) -> bool:
        return self._gate.acquire(timeout=-1 if timeout_s is None else timeout_s)


Pending = concurrent.futures.Future[RemotingCommand] | Waiter


class Connection:
    """A connection to ``address``; ``failure`` turns a transport error into what callers get."""

    def __init__(
        self,
        address: str,
        host: str,
        port: int,
        *,
        context: ssl.SSLContext | None,
        timeout_s: float,
        failure: Failure,
        on_request: Callable[[RemotingCommand, Connection], None] | None = None,
        on_close: Callable[[Connection, RocketSparkError], None] | None = None,
    ) -> None:
        self.address = address
        self.failure = failure
        self.on_request = on_request
        self.on_close = on_close
        self._pending: dict[int, Pending] = {}
        self._streams: dict[int, queue.SimpleQueue[object]] = {}
        self._lock = threading.Lock()  # the pending tables
        self._send_lock = threading.Lock()  # one frame at a time on the socket
        self._opaques = itertools.count(1)
        self._broken: RocketSparkError | None = None
        self.answered = False  # the server has answered something on it
        sock = socket.create_connection((host, port), timeout=timeout_s)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._tls = _Tls(sock, context, host, timeout_s) if context is not None else None
            sock.settimeout(None)
        except BaseException:
            sock.close()
            raise
        self._sock = sock
        self._reader = threading.Thread(target=self._read, name=f"remoting-{address}", daemon=True)
        self._reader.start()

    @property
    def alive(self) -> bool:
        return self._broken is None

    # -- sending ---------------------------------------------------------------------------------

    def submit(
        self, request: RemotingCommand, timeout_s: float, expire: Expire
    ) -> concurrent.futures.Future[RemotingCommand]:
        """Send a request; the future settles with its answer, or fails with ``expire()`` at
        its deadline, or with the connection's error."""
        future: concurrent.futures.Future[RemotingCommand] = concurrent.futures.Future()
        with self._lock:
            if self._broken is not None:
                future.set_exception(self._broken)
                return future
            request.opaque = opaque = next(self._opaques)  # unique on this connection
            self._pending[opaque] = future
        future.add_done_callback(lambda _: self._forget(opaque))
        DEADLINES.add(time.monotonic() + timeout_s, future, expire)
        self._send_or_fail(request)
        return future

    def call(self, request: RemotingCommand, timeout_s: float, expire: Expire) -> RemotingCommand:
        """Send a request and wait for its answer in the caller's thread; raise the
        connection's error, or ``expire()`` at the deadline."""
        waiter = Waiter()
        with self._lock:
            if self._broken is not None:
                raise self._broken
            request.opaque = opaque = next(self._opaques)
            self._pending[opaque] = waiter
        self._send_or_fail(request)
        if not waiter.wait(timeout_s):
            with self._lock:
                abandoned = self._pending.pop(opaque, None) is not None
            if abandoned:
                raise expire()
            waiter.wait(None)  # the answer came as the deadline passed: it is being handed over
        if waiter.error is not None:
            raise waiter.error
        assert waiter.result is not None
        return waiter.result

    def send_oneway(self, request: RemotingCommand) -> None:
        request.flag |= Flag.ONEWAY
        with self._lock:
            if self._broken is not None:
                raise self._broken
            request.opaque = next(self._opaques)
        self._send_or_fail(request)

    def open_stream(self, request: RemotingCommand) -> tuple[int, queue.SimpleQueue[object]]:
        """Send a streaming request (MORE flag); its responses arrive on the queue, then its end."""
        request.flag |= Flag.MORE
        responses: queue.SimpleQueue[object] = queue.SimpleQueue()
        with self._lock:
            if self._broken is not None:
                raise self._broken
            request.opaque = opaque = next(self._opaques)
            self._streams[opaque] = responses
        self._send_or_fail(request)
        return opaque, responses

    def forget_stream(self, opaque: int) -> None:
        with self._lock:
            self._streams.pop(opaque, None)

    def _forget(self, opaque: int) -> None:
        with self._lock:
            self._pending.pop(opaque, None)

    def _send_or_fail(self, command: RemotingCommand) -> None:
        parts = frame.encode(command)
        try:
            with self._send_lock:
                if self._tls is not None:
                    self._sock.sendall(self._tls.encrypt(parts))
                elif len(parts) == 1:
                    self._sock.sendall(parts[0])
                else:
                    self._send_parts(parts)
        except OSError as exc:
            self._fail(exc)
            raise self._broken or self.failure(exc, self.answered) from None

    def _send_parts(self, parts: list[bytes]) -> None:
        """Header and body with one system call where it can, never copying the body."""
        sent = self._sock.sendmsg(parts)
        total = sum(map(len, parts))
        if sent < total:
            self._sock.sendall(memoryview(b"".join(parts))[sent:])

    # -- reading ---------------------------------------------------------------------------------

    def _read(self) -> None:
        buffer = bytearray()
        error: BaseException = Closed("the server closed the connection")
        try:
            while True:
                data = self._sock.recv(READ_BYTES)
                if self._tls is not None:
                    plain = self._tls.decrypt(data)
                    reply = self._tls.pending()
                    if reply:
                        with self._send_lock:
                            self._sock.sendall(reply)
                    if not data:
                        break
                    data = plain
                elif not data:
                    break
                if buffer:
                    buffer += data
                    used = self._frames(buffer)
                    del buffer[:used]
                else:
                    used = self._frames(data)
                    if used < len(data):
                        buffer += data[used:]
        except (OSError, ssl.SSLError, MalformedCommand) as exc:
            error = exc
        self._fail(error)

    def _frames(self, view: bytes | bytearray) -> int:
        pos, end = 0, len(view)
        while end - pos >= frame.PREFIX_BYTES:
            length, word = frame.PREFIX.unpack_from(view, pos)
            header_bytes = frame.header_length(word)
            if length < 4 + header_bytes:
                raise MalformedCommand(f"the server sent a frame of length {length} with a {header_bytes}-byte header")
            if end - pos - 4 < length:
                break
            start = pos + frame.PREFIX_BYTES
            command = frame.decode_header(frame.serialization(word), memoryview(view)[start : start + header_bytes])
            command.body = bytes(view[start + header_bytes : pos + 4 + length])
            pos += 4 + length
            self._dispatch(command)
        return pos

    def _dispatch(self, command: RemotingCommand) -> None:
        if not command.is_response:
            if self.on_request is not None:
                self.on_request(command, self)
            return
        self.answered = True
        opaque = command.opaque
        with self._lock:
            future = self._pending.pop(opaque, None)
            responses = self._streams.get(opaque) if future is None else None
            if responses is not None and not command.flag & Flag.MORE:
                del self._streams[opaque]
        if future is not None:
            if not future.done():
                try:
                    future.set_result(command)
                except concurrent.futures.InvalidStateError:
                    pass  # its deadline fired first
        elif responses is not None:
            responses.put(command)
            if not command.flag & Flag.MORE:
                responses.put(_END)

    # -- ending ----------------------------------------------------------------------------------

    def _fail(self, cause: BaseException) -> None:
        """The connection is done: fail what waits on it, once."""
        with self._lock:
            if self._broken is not None:
                return
            self._broken = error = self.failure(cause, self.answered)
            pending, self._pending = self._pending, {}
            streams, self._streams = self._streams, {}
        for waiting in pending.values():
            if not waiting.done():
                try:
                    waiting.set_exception(error)
                except concurrent.futures.InvalidStateError:
                    pass
        for responses in streams.values():
            responses.put(error)
        try:
            self._sock.close()
        except OSError:
            pass
        if self.on_close is not None:
            self.on_close(self, error)

    def close(self) -> None:
        """Close it: what was sent is delivered (a graceful shutdown), what waits fails."""
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._fail(Closed("the connection was closed by this client"))
