"""The HTTP servers of a process (``/metrics``, the console): a thread per request, quick to
stop, and with TLS the handshake made in the request's thread, under a timeout, so that a
client that connects and says nothing holds up neither other clients nor a shutdown."""

from __future__ import annotations

import socket
import ssl
import threading
from http.server import ThreadingHTTPServer
from socketserver import BaseServer
from typing import Any

POLL_S = 0.05  # how soon a stop is noticed
CLIENT_TIMEOUT_S = 10.0  # a silent client's connection is dropped after this


class Server(ThreadingHTTPServer):
    daemon_threads = True
    tls: ssl.SSLContext | None = None

    def get_request(self) -> tuple[Any, Any]:
        sock, address = self.socket.accept()
        sock.settimeout(CLIENT_TIMEOUT_S)
        if self.tls is not None:  # the handshake happens on the first read, in the request's thread
            sock = self.tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return sock, address

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that went away, or a failed handshake: nothing to report


def serve(host: str, port: int, handler: type[Any], tls: ssl.SSLContext | None = None, name: str = "http") -> Server:
    """Bind ``host:port`` (0: a free port) and serve in a daemon thread; ``stop`` ends it."""
    server = Server((host, port), handler, bind_and_activate=False)
    try:
        server.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.server_bind()
        server.server_activate()
    except OSError:
        server.server_close()
        raise
    server.tls = tls
    threading.Thread(target=server.serve_forever, args=(POLL_S,), name=name, daemon=True).start()
    return server


def port_of(server: Server) -> int:
    return int(server.server_address[1])


def stop(server: BaseServer) -> None:
    server.shutdown()  # returns within POLL_S
    server.server_close()
