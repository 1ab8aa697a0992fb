"""One TLS session over memory buffers (``ssl.MemoryBIO``) for a client connection
(:mod:`rocketspark.remoting.connection`): its writer and reader threads share one session under
one lock, which Python's ``SSLSocket`` does not allow."""

from __future__ import annotations

import socket
import ssl
import threading
from typing import Final

from rocketspark.remoting.closed import Closed

READ_BYTES: Final = 256 * 1024  # the most taken from a socket at once


class TlsSession:
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
