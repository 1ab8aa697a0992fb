"""A producer's heartbeat: it announces its producer group to each broker it sends to, so that
operators see it (``Admin.producer_connections``, ``admin producer-connection``), as RocketMQ's
producers do with HEART_BEAT.

A broker is announced to the first time the producer sends to it (the check on the send path
is one set lookup), then every ``HEARTBEAT_INTERVAL_S`` (RocketMQ's ``heartbeatBrokerInterval``,
30 s) on one background thread, started with the first announcement; a producer that never
sends starts nothing. Closing the producer unregisters it (UNREGISTER_CLIENT) from each; one
that dies drops out of the brokers' lists when its connections close, or (its host lost) after
their ``consumer_expired_ms`` (120 s).
Announcements (and the unregistering) are oneway: a broker that is down misses one and hears
the next; nothing waits for them.
"""

from __future__ import annotations

import functools
import importlib.metadata
import threading
from typing import Final, Protocol

from rocketspark.client.daemon import DaemonThread
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.command import RemotingCommand

DEFAULT_PRODUCER_GROUP: Final = "DEFAULT_PRODUCER"  # RocketMQ's default producer group
INNER_PRODUCER_GROUP: Final = "CLIENT_INNER_PRODUCER"  # RocketMQ's, for a consumer's sends back to retry
HEARTBEAT_INTERVAL_S: Final = 30.0


@functools.cache
def client_version() -> str:
    """What our clients report as their version: "rocketspark 0.1.0"."""
    try:
        return f"rocketspark {importlib.metadata.version('rocketspark')}"
    except importlib.metadata.PackageNotFoundError:  # run from a source tree, not installed
        return "rocketspark"


class Caller(Protocol):
    """The producer's remoting client, as heartbeats use it."""

    def invoke_oneway(self, address: str, request: RemotingCommand, timeout_ms: int | None = None) -> None: ...


class ProducerHeartbeats:
    """A producer's announcements of its ``group`` (None: it has none, and announces nothing)."""

    def __init__(
        self, remoting: Caller, group: str | None, client_id: str, interval_s: float = HEARTBEAT_INTERVAL_S
    ) -> None:
        self.remoting = remoting
        self.group = group
        self.client_id = client_id
        self.interval_s = interval_s
        self.known: set[str] = set()  # broker addresses announced to (read without the lock: sends check it)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = DaemonThread(self._run, "producer-heartbeat")

    def seen(self, address: str) -> None:
        """A send to ``address``: the first announces the producer there (the others cost a set
        lookup)."""
        if address in self.known or self.group is None:
            return
        with self._lock:
            if address in self.known or self._stop.is_set():
                return
            self.known = self.known | {address}  # a new set: readers never see one change under them
        self._announce(address, RequestCode.HEART_BEAT)
        self._thread.ensure()

    def _ext(self) -> dict[str, object]:
        return {"producerGroup": self.group, "clientId": self.client_id, "clientVersion": client_version()}

    def _announce(self, address: str, code: int) -> None:
        self.remoting.invoke_oneway(address, RemotingCommand.request(code, self._ext()))

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            for address in sorted(self.known):
                self._announce(address, RequestCode.HEART_BEAT)

    def close(self) -> None:
        """Stop heartbeating and leave the group on every broker announced to (a broker that
        misses it forgets the producer when its connection closes, or after its expiry)."""
        with self._lock:
            self._stop.set()
            known, self.known = sorted(self.known), set()
        for address in known:  # oneway: written before the producer's connections close, waited for by nobody
            self._announce(address, RequestCode.UNREGISTER_CLIENT)
