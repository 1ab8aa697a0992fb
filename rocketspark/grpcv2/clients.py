"""The endpoint's own clients of the cluster, and the broker it runs in as one of their peers.

The endpoint works as RocketMQ 5's proxy does in cluster mode: it serves every topic of the
cluster through our own producer, consumer and admin, signed with the cluster credential (the
v2 caller was authorized at the endpoint's edge already). A request for the broker the endpoint
runs in skips the network (``InProcess``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any, Final, Protocol, TypeVar

from rocketspark.client.admin import Admin
from rocketspark.client.consumer import Consumer
from rocketspark.client.producer import Producer
from rocketspark.errors import RequestTimeoutError, RocketSparkError
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.trace import READ_AHEAD
from rocketspark.remoting.deadlines import DEADLINES
from rocketspark.security.settings import PeerSecurity
from rocketspark.security.signing import CLUSTER_ACCESS_KEY

T = TypeVar("T")
# The endpoint's own threads for its blocking calls to the cluster: a burst of v2 requests
# cannot take the threads the broker's own work (offset flushes, registration) runs on.
EXECUTOR: Final = concurrent.futures.ThreadPoolExecutor(max_workers=16, thread_name_prefix="grpc-v2")


async def in_thread(call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``call`` on the endpoint's threads, awaited."""
    return await asyncio.get_running_loop().run_in_executor(EXECUTOR, functools.partial(call, *args, **kwargs))


class Clients(Protocol):
    """What the endpoint's parts use of the cluster: ``EndpointClients`` is one, a test may give another."""

    @property
    def consumer(self) -> Consumer: ...
    @property
    def producer(self) -> Producer: ...
    @property
    def admin(self) -> Admin: ...


class EndpointClients:
    """The endpoint's own clients of the cluster, made on first use and signed with the
    cluster credential (the v2 caller was authorized at this edge already)."""

    def __init__(
        self, nameservers: list[str], security: PeerSecurity, max_body_bytes: int, *, local: InProcess | None = None
    ) -> None:
        self.nameservers = nameservers
        self.max_body_bytes = max_body_bytes  # the broker's max_message_bytes
        self.options: dict[str, Any] = {}
        if security.credentials is not None:
            self.options |= {"access_key": CLUSTER_ACCESS_KEY, "secret_key": security.credentials.secret_key}
        tls = security.client_tls
        if tls is not None:
            self.options |= {"tls": True, "tls_ca_file": tls.ca_file or None}
            if tls.cert_file:
                self.options |= {"tls_cert_file": tls.cert_file, "tls_key_file": tls.key_file}
        self._lock = threading.Lock()
        self._producer: Producer | None = None
        self._admin: Admin | None = None
        self._consumer: Consumer | None = None
        self.local = local  # the broker this endpoint runs in: called without the network

    @property
    def producer(self) -> Producer:
        with self._lock:
            if self._producer is None:
                # No auto-create: the caller was authorized for Pub, not Create (rules.send).
                self._producer = Producer(
                    self.nameservers,
                    max_message_bytes=self.max_body_bytes,
                    auto_create_topics=False,
                    local=self.local,
                    group=None,  # the endpoint's v2 producers are listed by it, each under its topics
                    **self.options,
                )
            return self._producer

    @property
    def admin(self) -> Admin:
        with self._lock:
            if self._admin is None:
                self._admin = Admin(self.nameservers, local=self.local, **self.options)
            return self._admin

    @property
    def consumer(self) -> Consumer:
        with self._lock:
            if self._consumer is None:
                # its reads are the endpoint's read-ahead, not deliveries: the endpoint traces those
                labels = {"via": READ_AHEAD}
                self._consumer = Consumer(self.nameservers, local=self.local, labels=labels, **self.options)
            return self._consumer

    def close(self) -> None:
        with self._lock:
            for client in (self._producer, self._admin, self._consumer):
                if client is not None:
                    client.close()
            self._producer = self._admin = self._consumer = None


class InProcess:
    """The broker an endpoint runs in, as its clients' ``LocalPeer``: a request to it runs on
    the broker's event loop through its dispatcher's ``serve_local``, with the usual deadline.

    A broker built without a loop (a test's, served by nobody) serves nothing here: its
    clients' requests go over the network."""

    def __init__(
        self,
        serve_local: Callable[[RemotingCommand], Coroutine[Any, Any, RemotingCommand]],
        loop: asyncio.AbstractEventLoop | None,
        address: str,
    ) -> None:
        self._serve_local = serve_local
        self._loop = loop
        self._address = address

    def serves(self, address: str) -> bool:
        """Whether a request to ``address`` is this broker's, to run here: the one place that
        decides "is this address local?" (the remoting client and the v2 send both ask it)."""
        return self._loop is not None and address == self._address

    async def call(self, request: RemotingCommand) -> RemotingCommand:
        """From the broker's own event loop: the request's answer, with no thread between."""
        return await self._serve_local(request)

    def submit(self, request: RemotingCommand, timeout_s: float) -> concurrent.futures.Future[RemotingCommand]:
        loop = self._loop
        assert loop is not None, "asked only once serves() said so"
        future = asyncio.run_coroutine_threadsafe(self._serve_local(request), loop)
        code = request.code

        def expire() -> RocketSparkError:
            return RequestTimeoutError(f"this broker did not answer request code {code} within {timeout_s:g} s")

        DEADLINES.add(time.monotonic() + timeout_s, future, expire)
        return future
