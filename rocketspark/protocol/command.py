"""The RemotingCommand: the one envelope every request and response travels in.

RocketMQ's fields: ``code`` (a request code, or a response code), ``opaque`` (the request id a
response echoes), ``flag`` (response, oneway), ``remark`` (a response's message), ``ext`` (the
request or response header fields, RocketMQ's ``extFields``) and ``body`` (the bulk payload: a
batch record, a pull's records). How it travels on TCP, header serializations included, is
:mod:`rocketspark.remoting.frame`.
"""

from __future__ import annotations

import itertools
from typing import Any

from rocketspark.protocol.codes import Flag, ResponseCode

_opaque_counter = itertools.count(1)
MSGPACK = 2  # our header serialization (rocketspark.remoting.frame), the default of every command made here


class MalformedCommand(ValueError):
    """Raised when bytes on the wire do not decode to a RemotingCommand."""


class RemotingCommand:
    """A request or a response. Plain slots class: it is built once per RPC on hot paths."""

    __slots__ = (
        "body",
        "channel",
        "code",
        "ext",
        "flag",
        "held",
        "language",
        "local",
        "opaque",
        "remark",
        "serialize",
        "user",
        "version",
    )

    def __init__(
        self,
        code: int,
        *,
        opaque: int = 0,
        flag: int = 0,
        remark: str = "",
        ext: dict[str, Any] | None = None,
        body: bytes = b"",
        serialize: int = MSGPACK,
    ) -> None:
        self.code = code
        self.opaque = opaque
        self.flag = flag
        self.remark = remark
        self.ext: dict[str, Any] = ext if ext is not None else {}
        self.body = body
        self.user: str | None = None  # who signed it, set by a server's guard (never read from the wire)
        self.local = False  # made inside the server that serves it (Dispatcher.serve_local; never from the wire)
        self.serialize = serialize  # the header serialization it came in (a response goes back in it)
        self.language = ""  # a RocketMQ client's language and version, from a JSON or binary header
        self.channel: Any = None  # server side: the connection it came on (remoting.server.Channel)
        self.held = 0.0  # server side: seconds a long poll held it (kept out of its latency; never on the wire)
        self.version = 0

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
        """The response to this request: same opaque, response bit set, same serialization."""
        return RemotingCommand(
            code, opaque=self.opaque, flag=Flag.RESPONSE, remark=remark, ext=ext, body=body, serialize=self.serialize
        )

    @property
    def is_response(self) -> bool:
        return bool(self.flag & Flag.RESPONSE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & Flag.ONEWAY)

    def __repr__(self) -> str:
        kind = "response" if self.is_response else "request"
        return f"RemotingCommand({kind} code={self.code} opaque={self.opaque} ext={self.ext!r} body={len(self.body)}B)"
