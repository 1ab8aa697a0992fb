"""The client half of route-change notification: pushes from one nameserver.

The client registers its connection to its sticky nameserver (picked at random by the route
cache) for pushes (OPEN_PUSH_STREAM) and subscribes the topics it uses; the nameserver writes
the names of changed topics on that connection as oneway requests (as RocketMQ's NOTIFY_*
requests travel), and the cache re-reads those routes at once instead of waiting for the
30 s refresh.

Subscriptions belong to the registration (see ``nameserver.notify``): the nameserver keeps them
only while the connection is open and drops them all when it ends. So the order matters: the
client registers, waits for the answer, and only then subscribes every topic it watches; a
topic added later is subscribed at once if the registration is up, else at the next
(re)connect. When the sticky nameserver changes (the list changed, or it stopped answering)
the client drops its subscriptions there (an UNSUBSCRIBE of every topic: the connection may
stay, shared with other requests) and registers with the new one. A broken connection is
reopened with a short backoff.

A nameserver answers a subscription it did not keep whole with SUBSCRIPTION_REFUSED, which is
an outcome here, not a failure of the call: ``streamOpen`` false (the stream closed meanwhile:
nothing was kept, and the reconnect subscribes everything again), or topics past its
per-client cap (``max_subscriptions_per_client``) named in ``refused`` (the rest were kept).
Those are kept in ``refused``, counted in the route cache's ``subscriptions_refused``, logged
once with the nameserver's reason, and kept fresh by the 30 s refresh; each refresh round asks
for them again, in case room was made.
"""

from __future__ import annotations

import concurrent.futures
import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable, Iterable
from functools import partial
from typing import Protocol

from rocketspark.client.daemon import DaemonThread
from rocketspark.errors import RocketSparkError
from rocketspark.protocol.codes import RequestCode, ResponseCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.shapes import MAX_TOPICS_PER_REQUEST
from rocketspark.remoting.client import PushStream, RemotingClient, check

log = logging.getLogger(__name__)


def new_client_id() -> str:
    return f"{socket.gethostname()}@{os.getpid()}@{uuid.uuid4().hex[:12]}"


def _chunks(topics: list[str]) -> list[list[str]]:
    """Requests of at most MAX_TOPICS_PER_REQUEST topics: the nameserver refuses longer lists."""
    return [topics[i : i + MAX_TOPICS_PER_REQUEST] for i in range(0, len(topics), MAX_TOPICS_PER_REQUEST)]


class RefusalCounter(Protocol):
    """Where the subscriber counts the topics a nameserver refused (the route cache's counters)."""

    subscriptions_refused: int


class RouteSubscriber:
    """Keeps one push stream open to the sticky nameserver and its topics subscribed there.

    It is built with the few pieces of the route cache it uses, not the cache, so that the two
    do not depend on each other: the connections, the sticky nameserver (``current``, asked at
    each (re)connect, as it moves), where pushed topics go (``notified``), where refusals are
    counted (``counters``), and the poll interval its warning names."""

    def __init__(
        self,
        remoting: RemotingClient,
        current: Callable[[], str],
        notified: Callable[[list[str]], None],
        counters: RefusalCounter,
        poll_interval_ms: int,
    ) -> None:
        self.remoting = remoting
        self.current = current
        self.notified = notified
        self.counters = counters
        self.poll_interval_ms = poll_interval_ms
        self.client_id = new_client_id()
        self.topics: set[str] = set()
        self.refused: set[str] = set()  # topics the nameserver would not take (its cap): polled only
        self.nameserver: str | None = None  # where the topics are subscribed: its stream is open
        self._stream: PushStream | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = DaemonThread(self._run, "route-push")
        self._warned = False
        self.connected = threading.Event()  # the stream is open and its topics were subscribed

    # -- what to watch ---------------------------------------------------------------------------

    def subscribe(self, topics: Iterable[str]) -> None:
        with self._lock:
            new = set(topics) - self.topics
            if not new:
                return
            self.topics |= new
            nameserver = self.nameserver
        self._thread.ensure()
        if nameserver is not None:
            self._subscribe_async(nameserver, sorted(new))

    def unsubscribe(self, topics: Iterable[str]) -> None:
        with self._lock:
            gone = set(topics) & self.topics
            if not gone:
                return
            self.topics -= gone
            self.refused -= gone
            nameserver = self.nameserver
        if nameserver is not None:
            for chunk in _chunks(sorted(gone)):
                self.remoting.invoke_oneway(nameserver, self._request(RequestCode.UNSUBSCRIBE_TOPIC_ROUTE, chunk))

    def resubscribe(self) -> None:
        """Ask again for the topics the nameserver refused: expired or unsubscribed topics may
        have made room under its cap."""
        with self._lock:
            nameserver, retry = self.nameserver, sorted(self.refused & self.topics)
        if nameserver is not None and retry:
            self._subscribe_async(nameserver, retry)

    def _request(self, code: int, topics: list[str]) -> RemotingCommand:
        return RemotingCommand.request(code, {"clientId": self.client_id, "topics": topics})

    def _subscribe_async(self, nameserver: str, topics: list[str]) -> None:
        for chunk in _chunks(topics):
            request = self._request(RequestCode.SUBSCRIBE_TOPIC_ROUTE, chunk)
            future = self.remoting.invoke_async(nameserver, request, peer="nameserver")
            future.add_done_callback(partial(self._answered, chunk))

    def _answered(self, topics: list[str], future: concurrent.futures.Future[RemotingCommand]) -> None:
        try:
            self._record(topics, check(future.result(), ResponseCode.SUBSCRIPTION_REFUSED))
        except RocketSparkError as exc:
            log.debug("route subscription of %d topic(s) failed: %s", len(topics), exc)

    def _record(self, topics: list[str], response: RemotingCommand) -> None:
        """Note what the nameserver refused (SUCCESS: nothing). ``streamOpen`` false means the
        stream closed meanwhile: nothing was kept, and the reconnect subscribes everything again."""
        if response.ext.get("streamOpen") is False:
            log.debug("route subscription of %d topic(s) not kept: %s", len(topics), response.remark)
            return
        answer = response.ext.get("refused") if response.code == ResponseCode.SUBSCRIPTION_REFUSED else None
        refused = {str(t) for t in answer} if isinstance(answer, list) else set()
        with self._lock:
            self.refused = (self.refused - set(topics)) | (refused & self.topics)
        if not refused:
            return
        self.counters.subscriptions_refused += len(refused)
        if not self._warned:
            self._warned = True
            log.warning(
                "%s; this client polls them: their routes refresh every %d ms instead",
                response.remark or f"nameserver refused route subscriptions of {len(refused)} topic(s)",
                self.poll_interval_ms,
            )

    # -- the stream ------------------------------------------------------------------------------

    def nameserver_changed(self) -> None:
        """Move the subscriptions to the cache's (new) sticky nameserver."""
        stream, old = self._stream, self.nameserver
        if stream is not None and old != self.current():
            self._drop_subscriptions(old)
            stream.cancel()  # the loop registers with the new one

    def _drop_subscriptions(self, nameserver: str | None) -> None:
        """Unsubscribe every topic at ``nameserver`` (no list: all of this client's)."""
        if nameserver is not None:
            request = RemotingCommand.request(RequestCode.UNSUBSCRIBE_TOPIC_ROUTE, {"clientId": self.client_id})
            self.remoting.invoke_oneway(nameserver, request)

    def _attach(self, nameserver: str) -> None:
        """The stream is registered: from now on subscriptions are kept. Subscribe them all."""
        with self._lock:
            self.nameserver = nameserver
            self.refused.clear()
            topics = sorted(self.topics)
        for chunk in _chunks(topics):
            request = self._request(RequestCode.SUBSCRIBE_TOPIC_ROUTE, chunk)
            try:
                answer = self.remoting.invoke(nameserver, request, peer="nameserver")
                self._record(chunk, check(answer, ResponseCode.SUBSCRIPTION_REFUSED))
            except RocketSparkError as exc:
                log.debug("route subscription at %s failed: %s", nameserver, exc)
                return
        self.connected.set()

    def _run(self) -> None:
        backoff = 0.1
        while not self._stop.is_set():
            target = self.current()
            try:
                self._stream = self.remoting.open_push_stream(target, self.client_id)
                for command in self._stream:
                    backoff = 0.1
                    if command.is_response:  # the first message: registered, or why not (raised)
                        check(command)
                        self._attach(target)
                    elif command.code == RequestCode.NOTIFY_CLIENT_TOPIC_ROUTE_CHANGED:
                        topics = command.ext.get("topics")
                        if isinstance(topics, list):
                            self.notified([str(t) for t in topics])
            except RocketSparkError as exc:
                log.debug("route push stream to %s broke: %s", target, exc)
            except Exception:
                log.exception("route push stream to %s failed", target)
            finally:
                with self._lock:
                    self.nameserver = None  # the subscriptions there ended with the stream
                self.connected.clear()
            if self._stop.wait(backoff):
                return
            backoff = min(backoff * 2, 5.0)

    def close(self) -> None:
        """Stop, and end the subscriptions on the nameserver (closing the client's connections
        right after would too; a connection shared with others needs the unsubscription)."""
        self._stop.set()
        self._drop_subscriptions(self.nameserver)
        if self._stream is not None:
            self._stream.cancel()
