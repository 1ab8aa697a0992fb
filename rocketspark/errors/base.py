"""The root of rocketspark's errors: a wire code, whether a retry may succeed, and the details
that cross the wire with it. The hierarchy is drawn in :mod:`rocketspark.errors`."""

from __future__ import annotations

from typing import Any, ClassVar

from rocketspark.protocol.codes import ResponseCode


class RocketSparkError(Exception):
    """Base of every rocketspark error."""

    code: ClassVar[int] = int(ResponseCode.SYSTEM_ERROR)
    retriable: ClassVar[bool] = False
    # details a server sends with the error, in its response's ext (msgpack-able values), and
    # the client puts back into ``details``: what a caller needs besides the message
    wire_details: ClassVar[tuple[str, ...]] = ()

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details
