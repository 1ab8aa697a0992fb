"""The RemotingCommand: the one envelope every request and response travels in.

RocketMQ frames each call as ``code, language, version, opaque, flag, remark, extFields,
body``. We keep the fields that carry meaning over gRPC (gRPC already frames and versions
the stream) and encode them as one msgpack array, in this order::

    [code: int, opaque: int, flag: int, remark: str, ext: map[str, str|int|...], body: bytes]

``ext`` holds the request/response header fields (RocketMQ's ``extFields``); ``body`` holds
the bulk payload, e.g. a batch of messages or the raw records of a pull.
"""

from __future__ import annotations

import itertools
from typing import Any

import msgpack

from rocketspark.protocol.codes import Flag, ResponseCode

_opaque_counter = itertools.count(1)
HEAD_BYTES = 1024 * 1024  # decode_head reads no further (the first piece of a large request; its ext fits)


class MalformedCommand(ValueError):
    """Raised when bytes on the wire do not decode to a RemotingCommand."""


class RemotingCommand:
    """A request or a response. Plain slots class: it is built once per RPC on hot paths."""

    __slots__ = ("body", "code", "ext", "flag", "local", "opaque", "remark", "user")

    def __init__(
        self,
        code: int,
        *,
        opaque: int = 0,
        flag: int = 0,
        remark: str = "",
        ext: dict[str, Any] | None = None,
        body: bytes = b"",
    ) -> None:
        self.code = code
        self.opaque = opaque
        self.flag = flag
        self.remark = remark
        self.ext: dict[str, Any] = ext if ext is not None else {}
        self.body = body
        self.user: str | None = None  # who signed it, set by a server's guard (never read from the wire)
        self.local = False  # made inside the server that serves it (Dispatcher.serve_local; never from the wire)

    @classmethod
    def request(cls, code: int, ext: dict[str, Any] | None = None, body: bytes = b"") -> RemotingCommand:
        """A new request with a fresh opaque (request id)."""
        return cls(code, opaque=next(_opaque_counter), ext=ext, body=body)

    def response(
        self,
        code: int = ResponseCode.SUCCESS,
        *,
        remark: str = "",
        ext: dict[str, Any] | None = None,
        body: bytes = b"",
    ) -> RemotingCommand:
        """The response to this request: same opaque, response bit set."""
        return RemotingCommand(code, opaque=self.opaque, flag=Flag.RESPONSE, remark=remark, ext=ext, body=body)

    @property
    def is_response(self) -> bool:
        return bool(self.flag & Flag.RESPONSE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & Flag.ONEWAY)

    def encode(self) -> bytes:
        packed: bytes = msgpack.packb(
            [self.code, self.opaque, self.flag, self.remark, self.ext, self.body], use_bin_type=True
        )
        return packed

    @classmethod
    def decode(cls, data: bytes) -> RemotingCommand:
        """Parse wire bytes; any shape error becomes :class:`MalformedCommand`."""
        try:
            fields = msgpack.unpackb(data, raw=False, strict_map_key=True)
        except Exception as exc:  # msgpack raises several unrelated types for garbage input
            raise MalformedCommand(f"request is not valid msgpack ({type(exc).__name__}: {exc})") from exc
        if not isinstance(fields, list) or len(fields) != 6:
            raise MalformedCommand("request must be a msgpack array [code, opaque, flag, remark, ext, body]")
        code, opaque, flag, remark, ext, body = fields
        if not isinstance(code, int) or not isinstance(opaque, int) or not isinstance(flag, int):
            raise MalformedCommand("code, opaque and flag must be integers")
        if not isinstance(remark, str) or not isinstance(ext, dict) or not isinstance(body, bytes):
            raise MalformedCommand("remark must be a string, ext a map and body bytes")
        return cls(code, opaque=opaque, flag=flag, remark=remark, ext=ext, body=body)

    @classmethod
    def decode_head(cls, data: bytes) -> RemotingCommand | None:
        """The command without its body, parsed from the first bytes of ``data`` only: enough
        to refuse a large request (its opaque) without copying its body. None when the head
        is malformed or longer than ``HEAD_BYTES``; a full ``decode`` then reports why."""
        unpacker = msgpack.Unpacker(raw=False, strict_map_key=True)
        unpacker.feed(memoryview(data)[:HEAD_BYTES])
        try:
            if unpacker.read_array_header() != 6:
                return None
            code, opaque, flag, remark, ext = (unpacker.unpack() for _ in range(5))
        except Exception:  # msgpack.OutOfData for a long head; several types for garbage
            return None
        if not all(isinstance(v, int) for v in (code, opaque, flag)) or not isinstance(remark, str):
            return None
        return cls(code, opaque=opaque, flag=flag, remark=remark, ext=ext) if isinstance(ext, dict) else None

    def __repr__(self) -> str:
        kind = "response" if self.is_response else "request"
        return f"RemotingCommand({kind} code={self.code} opaque={self.opaque} ext={self.ext!r} body={len(self.body)}B)"
