"""One client connection to one server: RocketMQ's remoting frames over a TCP socket.

Every thread of a client shares it. A request is written from the caller's own thread,
straight to the socket (a synchronous caller that finds another writing leaves its frame to
that writer). Requests are matched to responses by ``opaque``, unique on the connection.

Answers are read by whoever holds the connection's read role. A caller that finds it free
reads the socket itself until its own answer is in, then hands the role to the one caller still
waiting, if one: a thread calling in a loop wakes no other. The background thread reads when
several callers wait (each gets its answer through its lock), when async calls or streams are
due, and when no caller has been about for ``CALLER_GRACE_S``. With TLS (an ``ssl.SSLObject``
over memory buffers, one session under one lock) it reads everything.

Requests the server writes on it (route-change pushes) go to ``on_request``, in whichever
thread reads: it must only hand them on (to a queue), never call the server itself.

If the connection breaks, every request waiting on it fails with the translated error and the
next request opens a new connection. This module raises transport errors as they come; the
client (:mod:`rocketspark.remoting.client`) turns them into rocketspark errors.
"""

from __future__ import annotations

import collections
import concurrent.futures
import itertools
import queue
import select
import socket
import ssl
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Final

from rocketspark.errors import RocketSparkError
from rocketspark.protocol.codes import Flag
from rocketspark.protocol.command import MalformedCommand, RemotingCommand
from rocketspark.remoting import frame
from rocketspark.remoting.closed import Closed
from rocketspark.remoting.deadlines import DEADLINES, Expire
from rocketspark.remoting.tls_session import READ_BYTES, TlsSession
from rocketspark.remoting.waiter import Waiter

CALLER_GRACE_S: Final = 0.02  # the background reader leaves the socket to callers for this long after the last
MAX_PARTS: Final = 256  # buffers given to one sendmsg (the kernel takes at most IOV_MAX)
_END = object()  # a stream's end, queued after its last response

Failure = Callable[[BaseException, bool], RocketSparkError]  # (cause, answered before) -> what callers get
Watch = tuple[float, Callable[[], None]]  # (every seconds, check): Connection.call's watch
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
        caller_grace_s: float = CALLER_GRACE_S,  # the background reader leaves the socket to callers this long
    ) -> None:
        self.address, self._grace = address, caller_grace_s
        self.failure = failure
        self.on_request = on_request
        self.on_close = on_close
        self._pending: dict[int, Pending] = {}
        self._waiting: dict[int, Waiter] = {}  # synchronous callers not answered yet (plaintext)
        self._read_role = threading.Lock()  # held by whoever reads the socket (plaintext)
        self._callers = 0  # synchronous calls in progress
        self._left = 0.0  # when the last synchronous call ended (monotonic)
        self._wake = threading.Event()  # the background reader is wanted back at once
        self._inbox = bytearray()  # the start of a frame not all in yet, read under the role
        self._streams: dict[int, queue.SimpleQueue[object]] = {}
        self._lock = threading.Lock()  # the pending tables
        self._send_lock = threading.Lock()  # one frame at a time on the socket
        self._outbox: collections.deque[list[bytes]] = collections.deque()  # frames left to the writer
        self._opaques = itertools.count(1)
        self._broken: RocketSparkError | None = None
        self.answered = False  # the server has answered something on it
        sock = socket.create_connection((host, port), timeout=timeout_s)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._tls = TlsSession(sock, context, host, timeout_s) if context is not None else None
            sock.settimeout(None)
        except BaseException:
            sock.close()
            raise
        self._sock, self._poll = sock, select.poll()
        self._poll.register(sock, select.POLLIN)
        reader = self._read if self._tls is not None else self._read_when_idle
        self._reader = threading.Thread(target=reader, name=f"remoting-{address}", daemon=True)
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
        self._wake_reader()
        future.add_done_callback(lambda _: self._forget(opaque))
        DEADLINES.add(time.monotonic() + timeout_s, future, expire)
        self._send_or_fail(request)
        return future

    def call(
        self, request: RemotingCommand, timeout_s: float, expire: Expire, watch: Watch | None = None
    ) -> RemotingCommand:
        """Send a request and wait for its answer in the caller's thread (reading it itself
        when nobody else reads); raise the connection's error, or ``expire()`` at the deadline.
        ``watch`` (every, check): ``check`` runs every ``every`` s of the wait; what it raises gives
        the request up as the deadline would (a send stops waiting for a master deposed meanwhile)."""
        waiter = Waiter()
        with self._lock:
            if self._broken is not None:
                raise self._broken
            request.opaque = opaque = next(self._opaques)
            self._pending[opaque] = waiter
            if self._tls is None:
                self._waiting[opaque] = waiter
                self._callers += 1
        try:
            self._send_or_fail(request, leave=True)
            deadline = time.monotonic() + timeout_s
            if self._tls is None and self._read_role.acquire(blocking=False):
                waiter.promoted = True
            while not waiter.settled:
                until = deadline if watch is None else min(deadline, time.monotonic() + watch[0])
                if waiter.promoted:
                    self._read_until(waiter, until)
                    if waiter.settled:
                        break
                elif waiter.wait(max(0.0, until - time.monotonic())):
                    continue  # answered, or handed the read role
                try:
                    if until >= deadline or watch is None:
                        raise expire()
                    watch[1]()
                except BaseException:  # its deadline, or what the watch found
                    if self._give_up(opaque, waiter):
                        raise
        finally:
            if self._tls is None:
                self._leave(waiter)
        if waiter.error is not None:
            raise waiter.error
        assert waiter.result is not None
        return waiter.result

    def _give_up(self, opaque: int, waiter: Waiter) -> bool:
        """Take a call out of the tables; False when its answer came meanwhile (it is being
        handed over: once it is in, it is the call's)."""
        with self._lock:
            abandoned = self._pending.pop(opaque, None) is not None
            self._waiting.pop(opaque, None)
        while not abandoned and not waiter.settled:
            waiter.wait(None)
        return abandoned

    def _leave(self, waiter: Waiter) -> None:
        with self._lock:
            self._callers -= 1
            self._left = time.monotonic()
        if waiter.promoted:  # by now out of the waiting table: nobody promotes it any more
            self._pass_role()

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
        self._wake_reader()
        self._send_or_fail(request)
        return opaque, responses

    def forget_stream(self, opaque: int) -> None:
        with self._lock:
            self._streams.pop(opaque, None)

    def _wake_reader(self) -> None:
        """An async answer or a stream is due: the background reader must not sleep out its
        grace after the last synchronous caller (nobody else would read it)."""
        if self._tls is None:
            self._wake.set()

    def _forget(self, opaque: int) -> None:
        with self._lock:
            self._pending.pop(opaque, None)

    def _send_or_fail(self, command: RemotingCommand, *, leave: bool = False) -> None:
        """Write a frame. With ``leave`` (a synchronous call, whose failure reaches it through
        its waiter) a caller that finds the socket busy leaves its frame to the thread writing,
        which writes every frame left before it lets go: no caller sleeps on the socket's lock,
        and frames that meet leave in one system call."""
        parts = frame.encode(command)
        try:
            if leave and self._tls is None:
                self._outbox.append(parts)
            else:
                with self._send_lock:
                    if self._tls is not None:
                        self._sock.sendall(self._tls.encrypt(parts))
                    else:
                        self._send_parts(parts)
            while self._outbox and self._send_lock.acquire(blocking=False):
                try:
                    self._send_left()
                finally:
                    self._send_lock.release()
        except OSError as exc:
            self._fail(exc)
            raise self._broken or self.failure(exc, self.answered) from None

    def _send_left(self) -> None:
        outbox, parts = self._outbox, []
        while outbox:
            parts += outbox.popleft()  # deque operations are atomic: a frame left meanwhile is seen next round
        self._send_parts(parts)

    def _send_parts(self, parts: list[bytes]) -> None:
        """Header and body with one system call where it can, never copying the body."""
        if len(parts) == 1 or len(parts) > MAX_PARTS:
            self._sock.sendall(parts[0] if len(parts) == 1 else b"".join(parts))
            return
        sent = self._sock.sendmsg(parts)
        total = sum(map(len, parts))
        if sent < total:
            self._sock.sendall(memoryview(b"".join(parts))[sent:])

    # -- reading ---------------------------------------------------------------------------------

    def _read_when_idle(self) -> None:
        """The background reader of a plaintext connection: it reads while no caller does
        (answers to async calls, streams, pushes, the connection's end), and stands aside
        while callers come, since each reads for itself."""
        while self._broken is None:
            waiting = len(self._waiting)
            alone = waiting <= 1 and len(self._pending) <= waiting and not self._streams
            if alone and (self._callers or time.monotonic() - self._left < self._grace):
                self._wake.wait(self._grace)
                self._wake.clear()
                continue
            if not self._read_role.acquire(timeout=self._grace):
                continue
            try:
                self._read_once(None)
            finally:
                self._pass_role(background=True)

    def _read_until(self, waiter: Waiter, deadline: float) -> None:
        """Read (holding the role) until ``waiter`` is settled or the deadline passes."""
        while not waiter.settled:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            self._read_once(remaining)

    def _read_once(self, timeout_s: float | None) -> None:
        """Wait at most ``timeout_s`` (None: until they come) for bytes, then take every whole
        frame in (the caller holds the read role); a failure ends the connection."""
        try:
            if timeout_s is not None and not self._poll.poll(max(1, int(timeout_s * 1000))):
                return
            data = self._sock.recv(READ_BYTES)
            if not data:
                raise Closed("the server closed the connection")
            self._take_frames(self._inbox, data)
        except (OSError, MalformedCommand) as exc:
            self._fail(exc)

    def _pass_role(self, *, background: bool = False) -> None:
        """Hand the read role to the one caller still waiting for its answer, or let it go
        (under the lock, so that a caller registered after the look finds it free): with
        several waiting, or async answers due, the background reader reads for them all, as
        a caller reading for others would hand each its answer anyway and wake one more."""
        with self._lock:
            waiting = [waiter for waiter in self._waiting.values() if not waiter.promoted]
            if len(waiting) == 1:
                waiting[0].promote()
                return
            self._read_role.release()
            wanted = len(waiting) > 1 or len(self._pending) > len(self._waiting) or bool(self._streams)
        if wanted and not background:
            self._wake.set()

    def _read(self) -> None:
        """The reader thread of a TLS connection: it reads everything."""
        tls, buffer = self._tls, bytearray()
        assert tls is not None
        error: BaseException = Closed("the server closed the connection")
        try:
            while data := self._sock.recv(READ_BYTES):
                data = tls.decrypt(data)
                reply = tls.pending()
                if reply:
                    with self._send_lock:
                        self._sock.sendall(reply)
                self._take_frames(buffer, data)
            tls.decrypt(b"")  # the peer's close, as TLS sees it
        except (OSError, ssl.SSLError, MalformedCommand) as exc:
            error = exc
        self._fail(error)

    def _take_frames(self, buffer: bytearray, data: bytes) -> None:
        """Every whole frame of ``buffer`` + ``data``; ``buffer`` keeps the partial tail."""
        if buffer:  # frames are counted before slicing: compiled, a call in a slice's bound runs twice
            buffer.extend(data)
            used = frame.take_commands(buffer, self._dispatch)
            del buffer[:used]
        else:
            used = frame.take_commands(data, self._dispatch)
            buffer.extend(memoryview(data)[used:])

    def _dispatch(self, command: RemotingCommand) -> None:
        if not command.is_response:
            if self.on_request is not None:
                self.on_request(command, self)
            return
        self.answered = True
        opaque = command.opaque
        with self._lock:
            future = self._pending.pop(opaque, None)
            self._waiting.pop(opaque, None)
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
            self._waiting = {}
            streams, self._streams = self._streams, {}
        for waiting in pending.values():
            if not waiting.done():
                try:
                    waiting.set_exception(error)
                except concurrent.futures.InvalidStateError:
                    pass
        for responses in streams.values():
            responses.put(error)
        for end in (partial(self._sock.shutdown, socket.SHUT_RDWR), self._sock.close):  # the shutdown wakes a poll
            try:
                end()
            except OSError:
                pass
        if self.on_close is not None:
            self.on_close(self, error)

    def close(self) -> None:
        """Close it: what was sent is delivered (``_fail`` shuts down gracefully), what waits fails."""
        self._fail(Closed("the connection was closed by this client"))
