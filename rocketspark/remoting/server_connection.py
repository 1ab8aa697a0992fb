"""One client connection on the server's side: RocketMQ remoting frames in, responses and
pushes out (the listener, :mod:`rocketspark.remoting.listener`, accepts the connections).

One asyncio protocol per connection, on the server's event loop (uvloop where installed). A
client keeps one connection per server and sends every request on it; requests are served
concurrently (each its own task: a long poll never holds up the requests behind it) and
answered in any order, matched by ``opaque``. The server writes its own requests on the same
connection (route-change pushes: ``Channel.push``).

A frame is taken in two steps (:class:`rocketspark.remoting.server.Dispatcher`): once its
header is in, the request is authenticated and its body admitted against the in-flight budget,
so a refused request (busy, unsigned, an unknown code) is answered at once and its body is
dropped as it comes, never held. A peer that stops in the middle of a frame (or sends slower
than ``MIN_BODY_RATE`` once ``STALL_S`` have passed) is disconnected, and whatever it held is
given back. A frame that cannot be parsed ends the connection: nothing after it can be
trusted. When a client does not read its responses, the connection stops reading its requests
(TCP's own back-pressure) until it does.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import Callable
from typing import Final

from rocketspark.errors import MessageTooLargeError
from rocketspark.protocol.codes import Flag, RequestCode
from rocketspark.protocol.command import MalformedCommand, RemotingCommand
from rocketspark.remoting import frame
from rocketspark.remoting.admission import MAX_REQUEST_BYTES, Ticket
from rocketspark.remoting.eager import eagerly
from rocketspark.remoting.server import Dispatcher, response_for_exception
from rocketspark.remoting.streams import serve_stream

log = logging.getLogger(__name__)

TLS_HANDSHAKE: Final = 0x16  # the first byte of a TLS record carrying a ClientHello
STALL_S: Final = 5.0  # a frame begun and not continued for this long closes its connection
MIN_BODY_RATE: Final = 1024 * 1024  # bytes/s a large body must arrive at, past STALL_S
CHECK_S: Final = 1.0
FLUSH_BYTES: Final = 256 * 1024  # frames queued past this leave at once, without being joined
WRITE_HIGH_WATER: Final = 8 * 1024 * 1024  # past this unread, the connection stops taking requests


class _Body:
    """A frame whose body is still arriving."""

    __slots__ = ("data", "received", "request", "started", "ticket")

    def __init__(self, request: RemotingCommand | None, size: int, ticket: Ticket | None) -> None:
        self.request = request  # None: a refused request's body, dropped as it comes
        self.ticket = ticket
        self.data = bytearray(size) if request is not None else None
        self.received = 0
        self.started = time.monotonic()


class ServerConnection(asyncio.Protocol):
    """One client's connection. Made by its listener with what it uses of it: the dispatcher,
    the set of open connections it joins while open, whether the listener speaks TLS (a
    plaintext listener tells a TLS client so), and how long a frame may stall."""

    def __init__(
        self, dispatcher: Dispatcher, connections: set[ServerConnection], *, tls: bool, stall_s: float = STALL_S
    ) -> None:
        self.dispatcher = dispatcher
        self.connections = connections
        self.tls = tls
        self.stall_s = stall_s
        self.transport: asyncio.Transport | None = None
        self._loop: asyncio.AbstractEventLoop | None = None  # asyncio.get_running_loop() costs a getpid call each time
        self.peer = "?"
        self._buffer = bytearray()
        self._body: _Body | None = None
        self._pending_body = 0  # bytes of the body still to come
        self._progress = 0.0
        self._frame_started = 0.0
        self._streams: dict[int, asyncio.Task[None]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._closers: list[Callable[[], None]] = []
        self._paused = False
        self._writable = asyncio.Event()  # clear while the peer does not read (streams wait on it)
        self._writable.set()
        self._closed = False
        self._seen = False  # the connection's first bytes have been looked at
        self._outbox: list[bytes] | None = None  # frames written this turn of the loop, sent at its end
        self._outbox_bytes = 0
        self._watch: asyncio.TimerHandle | None = None

    # -- the Channel seen by handlers (rocketspark.remoting.server.Channel) ---------------------

    def push(self, command: RemotingCommand) -> bool:
        """Write a server-initiated request; False when the connection is gone or not reading."""
        if self._closed or self.transport is None or self._paused:
            return False
        self._write(command)
        return True

    def on_close(self, callback: Callable[[], None]) -> None:
        if self._closed:
            callback()
        else:
            self._closers.append(callback)

    @property
    def busy(self) -> bool:
        """Requests of this connection are being served."""
        return bool(self._tasks)

    # -- asyncio.Protocol ------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        stream: asyncio.Transport = transport  # type: ignore[assignment]  # uvloop's is no subclass of it
        self.transport = stream
        self._loop = asyncio.get_running_loop()
        stream.set_write_buffer_limits(high=WRITE_HIGH_WATER)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self._writable.set()
        self.connections.discard(self)
        if self._watch is not None:
            self._watch.cancel()
        body, self._body = self._body, None
        if body is not None and body.ticket is not None:
            body.ticket.release()
        for task in self._streams.values():
            task.cancel()
        for callback in self._closers:
            try:
                callback()
            except Exception:
                log.exception("%s: a connection close listener failed", self.dispatcher.server_name)
        self._closers.clear()

    def pause_writing(self) -> None:
        self._paused = True
        self._writable.clear()
        if self.transport is not None:
            self.transport.pause_reading()

    def resume_writing(self) -> None:
        self._paused = False
        self._writable.set()
        if self.transport is not None and not self._closed:
            self.transport.resume_reading()

    def data_received(self, data: bytes) -> None:
        self._progress = time.monotonic()
        if self._pending_body:
            data = self._feed_body(data)
            if not data:
                return
        buffer = self._buffer
        if buffer:
            buffer += data
            view: bytes | bytearray = buffer
        else:
            view = data
        try:
            used = self._frames(view)
        except MalformedCommand as exc:
            self._abort(f"unparseable frame: {exc}")
            return
        if used < len(view):
            self._buffer = bytearray(view[used:])
            if not self._pending_body and self._watch is None:
                self._frame_started = time.monotonic()
                self._arm()
        else:
            self._buffer = bytearray()

    # -- parsing ---------------------------------------------------------------------------------

    def _frames(self, view: bytes | bytearray) -> int:
        """Take every whole frame (or the start of a large one) from ``view``; return how many
        bytes were used."""
        pos, end = 0, len(view)
        if not self._seen and end >= 2:
            self._seen = True
            if view[0] == TLS_HANDSHAKE and view[1] == 3 and not self.tls:
                self._refuse_tls()
                return end
        while end - pos >= frame.PREFIX_BYTES:
            length, word = frame.PREFIX.unpack_from(view, pos)
            header_bytes = frame.header_length(word)
            if header_bytes > frame.MAX_HEADER_BYTES or length < 4 + header_bytes:
                raise MalformedCommand(f"frame length {length} with a header of {header_bytes} bytes")
            start = pos + frame.PREFIX_BYTES
            if end - start < header_bytes:
                break
            request = frame.decode_header(frame.serialization(word), memoryview(view)[start : start + header_bytes])
            body_bytes = length - 4 - header_bytes
            start += header_bytes
            if body_bytes > MAX_REQUEST_BYTES:
                self._reply(response_for_exception(request, _too_large(body_bytes, self.dispatcher), "listener"))
                raise MalformedCommand(f"a body of {body_bytes} bytes announced")
            size = header_bytes + body_bytes  # what it holds in memory, counted against the budget
            if end - start >= body_bytes:
                body = bytes(view[start : start + body_bytes]) if body_bytes else b""
                self._take(request, size, body)
                pos = start + body_bytes
                continue
            self._begin_body(request, size, body_bytes, view[start:end])
            return end
        return pos

    def _take(self, request: RemotingCommand, size: int, body: bytes) -> None:
        """A whole frame: accept it, then serve it (or answer its refusal). STOP_STREAM is the
        connection's own business (it ends a stream of this connection), answered by no one."""
        if request.code == RequestCode.STOP_STREAM:
            self._stop_stream(request)
            return
        accepted = self.dispatcher.accept(request, size)
        if isinstance(accepted, RemotingCommand):
            self._reply(accepted)
            return
        request.body = body
        self._start(request, accepted)

    def _begin_body(self, request: RemotingCommand, size: int, body_bytes: int, first: bytes | bytearray) -> None:
        accepted = self.dispatcher.accept(request, size)
        if isinstance(accepted, RemotingCommand):
            self._reply(accepted)  # answered at once; its body is dropped as it arrives
            self._body = _Body(None, body_bytes, None)
        else:
            self._body = _Body(request, body_bytes, accepted)
        self._pending_body = body_bytes
        self._frame_started = time.monotonic()
        self._arm()
        rest = self._feed_body(bytes(first))
        assert not rest

    def _feed_body(self, data: bytes) -> bytes:
        """Add to the body being received; return what follows it (the next frames)."""
        body = self._body
        assert body is not None
        take = min(len(data), self._pending_body)
        if body.data is not None:
            body.data[body.received : body.received + take] = data[:take] if take < len(data) else data
        body.received += take
        self._pending_body -= take
        if self._pending_body:
            return b""
        self._body = None
        if body.request is not None and body.ticket is not None:
            assert body.data is not None
            body.request.body = bytes(body.data)
            self._start(body.request, body.ticket)
        return data[take:]

    def _refuse_tls(self) -> None:
        """A TLS client on a plaintext port: a plaintext line its TLS layer cannot parse (it
        reports a wrong version number, which our client explains), then close."""
        log.info("%s: a TLS client (%s) on a plaintext port: refused", self.dispatcher.server_name, self.peer)
        assert self.transport is not None
        self.transport.write(b"rocketspark: this port speaks plaintext RocketMQ remoting, not TLS\n")
        self._closed = True
        self.transport.close()

    # -- serving ---------------------------------------------------------------------------------

    def _start(self, request: RemotingCommand, ticket: Ticket) -> None:
        request.channel = self
        loop = self._loop
        assert loop is not None
        if self.dispatcher.is_stream(request):
            stream = loop.create_task(self._stream(request, ticket))
            self._streams[request.opaque] = stream
            stream.add_done_callback(lambda _: self._streams.pop(request.opaque, None))
            return
        task = eagerly(loop, self._serve(request, ticket))
        if task is not None:
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _serve(self, request: RemotingCommand, ticket: Ticket) -> None:
        response = await self.dispatcher.serve(request, ticket)
        if not request.is_oneway:  # RocketMQ never answers a oneway request
            self._reply(response)

    async def _stream(self, request: RemotingCommand, ticket: Ticket) -> None:
        """Each response leaves as soon as it is made, with the MORE flag; an empty frame
        without it ends the stream (``frame.STREAM_END_FIELD``)."""
        async for response in serve_stream(self.dispatcher, request, ticket):
            response.flag |= Flag.MORE
            self._reply(response)
            await self._writable.wait()
        self._reply(request.response(ext={frame.STREAM_END_FIELD: True}))

    def _stop_stream(self, request: RemotingCommand) -> None:
        opaque = request.ext.get(frame.STOP_STREAM_FIELD)
        stream = self._streams.get(opaque) if isinstance(opaque, int) else None
        if stream is not None:
            stream.cancel()

    def _reply(self, response: RemotingCommand) -> None:
        if not self._closed:
            self._write(response)

    def _write(self, command: RemotingCommand) -> None:
        """Queue a frame; every frame queued in one turn of the loop leaves in one write (a
        system call is most of what a small answer costs, and under load many are ready at
        once), at the end of the turn, so no answer waits for another."""
        parts = frame.encode(command)
        if self._outbox is None:
            self._outbox = []
            self._outbox_bytes = 0
            loop = self._loop
            assert loop is not None
            loop.call_soon(self._flush)
        self._outbox.extend(parts)
        self._outbox_bytes += sum(map(len, parts))
        if self._outbox_bytes >= FLUSH_BYTES:
            self._flush()

    def _flush(self) -> None:
        out, self._outbox = self._outbox, None
        if not out or self._closed or self.transport is None:
            return
        if len(out) == 1:
            self.transport.write(out[0])
        elif self._outbox_bytes < FLUSH_BYTES:
            self.transport.write(b"".join(out))
        else:
            self.transport.writelines(out)

    # -- stalled peers ---------------------------------------------------------------------------

    def _arm(self) -> None:
        if self._watch is None and not self._closed:
            every = min(CHECK_S, self.stall_s / 2)
            assert self._loop is not None
            self._watch = self._loop.call_later(every, self._check_progress)

    def _check_progress(self) -> None:
        self._watch = None
        if self._closed or (not self._pending_body and not self._buffer):
            return
        now = time.monotonic()
        elapsed = now - self._frame_started
        received = self._body.received if self._body is not None else len(self._buffer)
        stall_s = self.stall_s
        if now - self._progress > stall_s:
            self._abort(f"it stopped sending in the middle of a frame for {stall_s:g} s")
        elif elapsed > stall_s and received < (elapsed - stall_s) * MIN_BODY_RATE:
            self._abort(f"it sends a frame slower than {MIN_BODY_RATE // 1024} KiB/s")
        else:
            self._arm()

    def _abort(self, why: str) -> None:
        log.warning("%s: closing the connection from %s: %s", self.dispatcher.server_name, self.peer, why)
        self._closed = True
        if self.transport is not None:
            self.transport.abort()


def _too_large(size: int, dispatcher: Dispatcher) -> MessageTooLargeError:
    return MessageTooLargeError(
        f"a request of {size} bytes is over the largest {dispatcher.server_name} takes ({MAX_REQUEST_BYTES} bytes); "
        "send smaller batches (the Producer's batch_max_bytes)"
    )
