"""Which official clients are still there, as one endpoint sees them.

A client is named by the ``x-mq-client-id`` its calls carry, unique to one client instance. It
keeps a ``Telemetry`` stream open to each endpoint it uses for as long as it runs: the official
clients open it at their start and open a new one when it breaks. So a client that had a stream
here is taken to be *gone* when none of its streams is open and

- it did not call this endpoint at all within ``GONE_GRACE_S`` of its last stream's end: a
  process that died (SIGKILL, a crash, a lost host) neither re-opens its stream nor calls, while
  a client that re-opens its stream after an error does so within about a second, and one that
  runs on without it (the Python client re-opens it only at its next settings sync, minutes
  later) still heartbeats every 10 s; or
- it called after that, but has not for ``ALIVE_S`` since.

``departed`` gives each gone client once; the endpoint then makes the messages it held visible
again (:meth:`rocketspark.grpcv2.pop.Pop.release`). A client that says it ends
(``NotifyClientTermination``) is released by the endpoint at once, and is ``ended`` for
``ALIVE_S`` after: a receive of its still waiting then hands it nothing more. A client that never opened a
stream here (a raw gRPC caller) is never taken to be gone: its messages come back at the end of
their invisible time, as before.

Pure logic on monotonic seconds, called on the endpoint's event loop.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

GONE_GRACE_S: Final = 2.0
ALIVE_S: Final = 30.0  # a client heard from within this lives (the official clients heartbeat every 10 s)


@dataclass(slots=True)
class _Client:
    streams: int = 0  # its Telemetry streams open now
    heard_at: float = -math.inf  # its last call
    ended_at: float | None = None  # when its last stream ended (it had one), while none is open


class Presence:
    def __init__(self, grace_s: float = GONE_GRACE_S, alive_s: float = ALIVE_S) -> None:
        self.grace_s = grace_s
        self.alive_s = alive_s
        self._clients: dict[str, _Client] = {}
        self._ended: dict[str, float] = {}  # clients that said they terminate -> when

    def heard_from(self, client: str, now: float) -> None:
        if client:
            self._clients.setdefault(client, _Client()).heard_at = now

    def opened(self, client: str, now: float) -> None:
        """A Telemetry stream of ``client`` began (a call too)."""
        if client:
            self._ended.pop(client, None)
            entry = self._clients.setdefault(client, _Client())
            entry.streams += 1
            entry.heard_at, entry.ended_at = now, None

    def closed(self, client: str, now: float) -> None:
        """A Telemetry stream of ``client`` ended, however it ended."""
        entry = self._clients.get(client)
        if entry is None or entry.streams == 0:  # forgotten meanwhile (it said it terminates)
            return
        entry.streams -= 1
        if entry.streams == 0:
            entry.ended_at = now

    def terminated(self, client: str, now: float) -> None:
        """It said it terminates: nothing is left to watch, and nothing more goes to it."""
        self._clients.pop(client, None)
        if client:
            self._ended[client] = now

    def ended(self, client: str) -> bool:
        return client in self._ended

    def alive(self, client: str, now: float) -> bool:
        """Whether ``client`` called within ``alive_s``: its auto-renewed messages stay invisible."""
        entry = self._clients.get(client)
        return entry is not None and now - entry.heard_at < self.alive_s

    def departed(self, now: float) -> list[str]:
        """The clients gone since the last call, each given once and then forgotten; clients
        with no stream that went quiet are forgotten too."""
        gone: list[str] = []
        for client in [c for c, at in self._ended.items() if now - at >= self.alive_s]:
            del self._ended[client]
        for client, entry in list(self._clients.items()):
            if entry.streams:
                continue
            if entry.ended_at is None:  # never had a stream here: watched for no departure
                if now - entry.heard_at >= self.alive_s:
                    del self._clients[client]
                continue
            called_since = entry.heard_at > entry.ended_at
            deadline = entry.heard_at + self.alive_s if called_since else entry.ended_at + self.grace_s
            if now >= deadline:
                del self._clients[client]
                gone.append(client)
        return gone

    def __len__(self) -> int:
        return len(self._clients) + len(self._ended)
