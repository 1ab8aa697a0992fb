"""The client half of route-change notification: one push stream to one nameserver.

The client keeps a push stream open to its sticky nameserver (picked at random by the route
cache) and subscribes the topics it uses; the nameserver pushes the names of changed topics,
and the cache re-reads those routes at once instead of waiting for the 30 s refresh. When the
sticky nameserver changes (the list changed, or it stopped answering), the topics are
unsubscribed on the old one and subscribed on the new one, so one client never hears the same
change from two nameservers. A broken stream is reopened with a short backoff.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING

from rocketspark.client.daemon import DaemonThread
from rocketspark.errors import RocketSparkError
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.remoting.client import ResponseStream

if TYPE_CHECKING:
    from rocketspark.client.routes import RouteCache

log = logging.getLogger(__name__)


def new_client_id() -> str:
    return f"{socket.gethostname()}@{os.getpid()}@{uuid.uuid4().hex[:12]}"


class RouteSubscriber:
    def __init__(self, cache: RouteCache) -> None:
        self.cache = cache
        self.client_id = new_client_id()
        self.topics: set[str] = set()
        self.nameserver: str | None = None  # where the topics are subscribed now
        self._stream: ResponseStream | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = DaemonThread(self._run, "route-push")
        self.connected = threading.Event()

    # -- what to watch ---------------------------------------------------------------------------

    def subscribe(self, topics: Iterable[str]) -> None:
        new = set(topics) - self.topics
        if not new:
            return
        with self._lock:
            self.topics |= new
        self._thread.ensure()
        if self.nameserver is not None:
            self._send(self.nameserver, RequestCode.SUBSCRIBE_TOPIC_ROUTE, sorted(new))

    def unsubscribe(self, topics: Iterable[str]) -> None:
        gone = set(topics) & self.topics
        if not gone:
            return
        with self._lock:
            self.topics -= gone
        if self.nameserver is not None:
            self._send(self.nameserver, RequestCode.UNSUBSCRIBE_TOPIC_ROUTE, sorted(gone))

    def resubscribe(self) -> None:
        if self.nameserver is not None and self.topics:
            self._send(self.nameserver, RequestCode.SUBSCRIBE_TOPIC_ROUTE, sorted(self.topics))

    def _send(self, nameserver: str, code: int, topics: list[str]) -> None:
        request = RemotingCommand.request(code, {"clientId": self.client_id, "topics": topics})
        self.cache.remoting.invoke_oneway(nameserver, request)

    # -- the stream ------------------------------------------------------------------------------

    def nameserver_changed(self) -> None:
        """Move the subscriptions to the cache's (new) sticky nameserver."""
        stream = self._stream
        if stream is not None and self.nameserver != self.cache.current_nameserver:
            stream.cancel()  # the loop reconnects to the new one and moves the topics

    def _run(self) -> None:
        backoff = 0.1
        while not self._stop.is_set():
            target = self.cache.current_nameserver
            if self.nameserver is not None and self.nameserver != target and self.topics:
                self._send(self.nameserver, RequestCode.UNSUBSCRIBE_TOPIC_ROUTE, sorted(self.topics))
            try:
                self._stream = self.cache.remoting.open_push_stream(target, self.client_id)
                self.nameserver = target
                if self.topics:
                    self._send(target, RequestCode.SUBSCRIBE_TOPIC_ROUTE, sorted(self.topics))
                self.connected.set()
                for command in self._stream:
                    backoff = 0.1
                    if command.code == RequestCode.NOTIFY_CLIENT_TOPIC_ROUTE_CHANGED:
                        topics = command.ext.get("topics")
                        if isinstance(topics, list):
                            self.cache.notified([str(t) for t in topics])
            except RocketSparkError as exc:
                log.debug("route push stream to %s broke: %s", target, exc)
            except Exception:
                log.exception("route push stream to %s failed", target)
            finally:
                self.connected.clear()
            if self._stop.wait(backoff):
                return
            backoff = min(backoff * 2, 5.0)

    def close(self) -> None:
        self._stop.set()
        if self.nameserver is not None and self.topics:
            try:
                self._send(self.nameserver, RequestCode.UNSUBSCRIBE_TOPIC_ROUTE, sorted(self.topics))
            except RocketSparkError:
                pass
        if self._stream is not None:
            self._stream.cancel()
