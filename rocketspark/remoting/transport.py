"""The client's transport seam: what code that sends requests needs of the wire.

``RemotingClient`` is the real one. Code that only sends (the pull pipeline, the Spark
reader, a broker's static-topic cleanup) takes a ``Transport``, so tests hand it a scripted
fake instead of patching a module.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Protocol

from rocketspark.protocol.command import RemotingCommand


class Transport(Protocol):
    def invoke(self, address: str, request: RemotingCommand, timeout_ms: int | None = None) -> RemotingCommand:
        """Send and wait for the answer (or raise the translated error)."""
        ...

    def invoke_async(
        self, address: str, request: RemotingCommand, timeout_ms: int | None = None
    ) -> Future[RemotingCommand]:
        """Send; the future resolves to the answer or to the translated error."""
        ...
