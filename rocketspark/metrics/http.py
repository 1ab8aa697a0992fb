"""The HTTP servers of a process (``/metrics``, the console): a thread per request, quick to
stop, and with TLS the handshake made in the request's thread, under a timeout, so that a
client that connects and says nothing holds up neither other clients nor a shutdown. A TLS
server answers a plain-HTTP request with a 400 saying to use https (as nginx does), instead of
a dropped connection; nothing else is served in the clear."""

from __future__ import annotations

import socket
import ssl
import threading
from http.server import ThreadingHTTPServer
from socketserver import BaseServer
from typing import Any

POLL_S = 0.05  # how soon a stop is noticed
CLIENT_TIMEOUT_S = 10.0  # a silent client's connection is dropped after this


TLS_HANDSHAKE = 0x16  # the first byte of every TLS connection (a handshake record)


class Server(ThreadingHTTPServer):
    daemon_threads = True
    tls: ssl.SSLContext | None = None
    name = "http"

    def get_request(self) -> tuple[Any, Any]:
        sock, address = self.socket.accept()
        sock.settimeout(CLIENT_TIMEOUT_S)
        return sock, address

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        if self.tls is not None:  # in the request's thread: the first read and the handshake may wait
            secured = self._secure(request)
            if secured is None:
                self.shutdown_request(request)
                return
            request = secured
        super().process_request_thread(request, client_address)

    def _secure(self, sock: socket.socket) -> ssl.SSLSocket | None:
        """The connection under TLS (the handshake happens on its first read), or None when the
        client spoke plain HTTP (answered with a 400 saying to use https) or nothing."""
        assert self.tls is not None
        try:
            first = sock.recv(1, socket.MSG_PEEK)
            if first and first[0] != TLS_HANDSHAKE:
                sock.recv(65536)  # its request head, so that closing does not reset the connection first
                body = f"this {self.name} server speaks HTTPS only: use https:// (trusting the cluster's CA)\n".encode()
                sock.sendall(
                    b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\n"
                    + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                    + body
                )
        except OSError:
            return None
        if not first or first[0] != TLS_HANDSHAKE:
            return None
        return self.tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)

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
    server.name = name
    threading.Thread(target=server.serve_forever, args=(POLL_S,), name=name, daemon=True).start()
    return server


def port_of(server: Server) -> int:
    return int(server.server_address[1])


def stop(server: BaseServer) -> None:
    server.shutdown()  # returns within POLL_S
    server.server_close()
