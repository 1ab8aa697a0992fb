"""Large requests cross the multiplexed stream in pieces, so a server can refuse them cheaply.

gRPC hands a server each stream message whole, and its Python layer copies it twice on the
way: ten clients sending a 64 MiB batch each at once cost a server over a gigabyte before it
could look at a single byte. So a request whose encoding is larger than ``PIECE_BYTES``
travels as several messages, one after the other on its stream::

    first:  0xC1  u64 total_size  first PIECE_BYTES of the encoded command
    then:   the next PIECE_BYTES, ... until total_size bytes have come

(0xC1 is the one byte msgpack never uses, so it cannot start a whole encoded command.) The
first piece holds the command's head, so the server admits or refuses the request against
its in-flight budget (``rocketspark.remoting.admission``) as soon as that piece arrives. A
refused request's later pieces are dropped as they come: memory stays near one piece per
stream, whatever the clients send. Small requests, and every response, are single messages.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Final

from rocketspark.protocol.command import MalformedCommand
from rocketspark.remoting.admission import Ticket

PIECE_BYTES: Final = 1024 * 1024
MARK: Final = 0xC1
_FIRST = struct.Struct(">BQ")  # mark, total size of the encoded command

Admit = Callable[[bytes, int], Ticket | bytes]  # (head bytes, size) -> admitted, or the answer


def messages(encoded: bytes) -> Iterator[bytes]:
    """The stream messages that carry one encoded command, in order."""
    if len(encoded) <= PIECE_BYTES:
        yield encoded
        return
    yield _FIRST.pack(MARK, len(encoded)) + encoded[:PIECE_BYTES]
    for start in range(PIECE_BYTES, len(encoded), PIECE_BYTES):
        yield encoded[start : start + PIECE_BYTES]


@dataclass(slots=True)
class Admitted:
    """A whole request, admitted: serve it, then release its ticket."""

    raw: bytes
    ticket: Ticket

    def take(self) -> bytes:
        """The request's bytes, which this object then stops holding."""
        raw, self.raw = self.raw, b""
        return raw


class Reassembler:
    """One stream's incoming messages back into requests, admitted on their first piece."""

    def __init__(self, admit: Admit) -> None:
        self._admit = admit
        self._left = 0  # bytes of the current pieced request still to come
        self._parts: list[bytes] | None = None  # its pieces so far; None when it was refused
        self._ticket: Ticket | None = None

    def feed(self, message: bytes) -> Admitted | bytes | None:
        """A whole admitted request, an answer to send at once (a refusal), or None (a piece
        taken). Raises MalformedCommand when the pieces do not add up: the stream is broken."""
        if self._left:
            return self._continue(message)
        if message[:1] != bytes([MARK]):
            admitted = self._admit(message, len(message))
            return admitted if isinstance(admitted, bytes) else Admitted(message, admitted)
        if len(message) <= _FIRST.size:
            raise MalformedCommand("the first piece of a large request is shorter than its header")
        _, total = _FIRST.unpack_from(message)
        piece = message[_FIRST.size :]
        if total <= len(piece):
            raise MalformedCommand(f"a large request of {total} bytes came in one piece of {len(piece)} bytes")
        admitted = self._admit(piece, total)
        self._left = total - len(piece)
        if isinstance(admitted, bytes):
            self._parts, self._ticket = None, None
            return admitted
        self._parts, self._ticket = [piece], admitted
        return None

    def _continue(self, piece: bytes) -> Admitted | None:
        self._left -= len(piece)
        if self._left < 0:
            self.close()
            raise MalformedCommand("a piece of a large request runs past the size its first piece announced")
        if self._parts is None:  # refused: dropped as it comes
            return None
        self._parts.append(piece)
        if self._left:
            return None
        raw, ticket = b"".join(self._parts), self._ticket
        self._parts, self._ticket = None, None
        assert ticket is not None
        return Admitted(raw, ticket)

    def close(self) -> None:
        """The stream ended: give back the budget of a request it left half sent."""
        if self._ticket is not None:
            self._ticket.release()
        self._parts, self._ticket, self._left = None, None, 0
