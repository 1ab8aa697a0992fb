"""The TCP side of a server: a bound socket (``bind``) and the connections it accepts, each
a :class:`rocketspark.remoting.server_connection.ServerConnection` that takes RocketMQ
remoting frames in and writes responses and pushes out."""

from __future__ import annotations

import asyncio
import socket
import time
from typing import Final

from rocketspark.remoting.server import Dispatcher
from rocketspark.remoting.server_connection import STALL_S, ServerConnection
from rocketspark.security.tls import ServerTls

HANDSHAKE_TIMEOUT_S: Final = 10.0


class Listener:
    """A bound TCP socket and the connections it accepted: ``start`` serves, ``stop`` ends."""

    def __init__(
        self, dispatcher: Dispatcher, sock: socket.socket, tls: ServerTls | None, *, stall_s: float = STALL_S
    ) -> None:
        self.dispatcher = dispatcher
        self.sock = sock
        self.tls = tls
        self.stall_s = stall_s
        self.port: int = sock.getsockname()[1]
        self.connections: set[ServerConnection] = set()
        self._server: asyncio.AbstractServer | None = None

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        context = self.tls.ssl_context() if self.tls is not None else None
        self._server = await loop.create_server(
            lambda: ServerConnection(self.dispatcher, self.connections, tls=self.tls is not None, stall_s=self.stall_s),
            sock=self.sock,
            ssl=context,
            ssl_handshake_timeout=HANDSHAKE_TIMEOUT_S if context is not None else None,
            start_serving=True,
        )

    async def stop(self, grace: float | None = None) -> None:
        """Stop accepting, give requests in flight up to ``grace`` seconds, then close every
        connection."""
        if self._server is not None:
            self._server.close()
        else:
            self.sock.close()
        if grace:
            deadline = time.monotonic() + grace
            while any(c.busy for c in self.connections) and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
        for connection in list(self.connections):
            if connection.transport is not None:
                connection.transport.close()
        if self._server is not None:
            await self._server.wait_closed()


def bind(host: str, port: int, server_name: str) -> socket.socket:
    """A listening socket on ``host:port`` (port 0 picks a free one), not yet served: a
    server knows its port, and so its address, before it is built around it."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, kind, proto, _, address = infos[0]
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        raise OSError(f"{server_name} cannot listen on {host}:{port}: {exc}") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(1024)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise OSError(f"{server_name} cannot listen on {host}:{port}: address in use or not available") from None
    return sock


def create_server(
    dispatcher: Dispatcher, host: str, port: int, tls: ServerTls | None = None, *, stall_s: float = STALL_S
) -> tuple[Listener, int]:
    """Bind (not start) a listener on ``host:port``, over TLS if ``tls`` is given; port 0 picks
    a free one. Binding here, before the event loop serves it, lets a server know its port."""
    listener = Listener(dispatcher, bind(host, port, dispatcher.server_name), tls, stall_s=stall_s)
    return listener, listener.port
