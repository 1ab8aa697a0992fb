"""What every client object shares: nameserver addresses, one remoting client, the route cache."""

from __future__ import annotations

from types import TracebackType
from typing import Any, Self, TypeVar, Unpack, cast

from rocketspark.client.routes import RouteCache, RouteKwargs, RouteOptions
from rocketspark.client.selection import no_master
from rocketspark.errors import NoRouteInfoError
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.types import TopicRouteData
from rocketspark.remoting.client import DEFAULT_TIMEOUT_MS, LocalPeer, RemotingClient, check
from rocketspark.security.client_side import SECURITY_KEYWORDS, ClientSecurity, SecurityKwargs


class ClientKwargs(RouteKwargs, SecurityKwargs, total=False):
    """The keywords every client takes: its route options and its security."""


C = TypeVar("C", bound="ClientBase")


class ClientBase:
    """Base of Producer, Consumer and Admin. Use as a context manager or call ``close()``."""

    def __init__(
        self,
        nameserver: str | list[str] | None = None,
        *,
        timeout_ms: int = DEFAULT_TIMEOUT_MS,
        local: LocalPeer | None = None,
        **options: Unpack[ClientKwargs],
    ) -> None:
        """Security: ``access_key``/``secret_key``, the user every request is signed as, and
        ``tls``/``tls_ca_file`` (``tls_cert_file``/``tls_key_file`` for mutual TLS), for a
        cluster with security on; each defaults to its environment variable (see
        :mod:`rocketspark.security.client_side`), else anonymous and plaintext. Routes:
        ``poll_interval_ms``, ``topic_expiry_ms``, ``not_found_ttl_ms``, ``route_push`` (see
        :class:`~rocketspark.client.routes.RouteOptions`)."""
        known = SECURITY_KEYWORDS | set(RouteKwargs.__annotations__)
        if unknown := sorted(set(options) - known):
            raise TypeError(
                f"{type(self).__name__}() got unexpected keyword argument(s) {', '.join(unknown)}; besides its own, "
                f"it takes {', '.join(sorted(known))}"
            )
        security = ClientSecurity.of(cast(SecurityKwargs, {k: v for k, v in options.items() if k in SECURITY_KEYWORDS}))
        route = cast(RouteKwargs, {k: v for k, v in options.items() if k not in SECURITY_KEYWORDS})
        route_options = RouteOptions.of(type(self).__name__, route)  # checked before anything starts
        self.timeout_ms = timeout_ms
        self._options = options
        self.remoting = RemotingClient(
            peer_kind="broker",
            default_timeout_ms=timeout_ms,
            credentials=security.credentials,
            tls=security.tls,
            local=local,
        )
        self.routes = RouteCache(nameserver, self.remoting, route_options)
        self.closed = False

    def sibling(self, kind: type[C], **own: Any) -> C:
        """A client of another kind that connects as this one does (same nameservers, user,
        TLS and route options), with ``own`` keywords of its kind: the admin's smoke-test send
        and consume use one."""
        return kind(self.nameservers, **own, **self._options)

    @property
    def nameservers(self) -> list[str]:
        """The nameserver addresses in use (the route cache's list)."""
        return self.routes.namesrv.addresses

    def update_nameservers(self, nameserver: str | list[str]) -> None:
        """Switch to another nameserver list (route subscriptions move with it)."""
        self.routes.namesrv.replace(nameserver)

    def broker_address(self, route: TopicRouteData, broker_name: str) -> str:
        address = route.address_of(broker_name)
        if address is None:
            raise NoRouteInfoError(
                f'broker "{broker_name}" is not in the route of topic "{route.topic}"; known brokers: '
                f"{', '.join(b.broker_name for b in route.brokers) or 'none'}"
            )
        if not address:
            raise no_master(route.topic, {broker_name})
        return address

    def call(self, address: str, request: RemotingCommand, timeout_ms: int | None = None, *ok: int) -> RemotingCommand:
        """Invoke on a broker and raise for any response code not in SUCCESS + ``ok``."""
        return check(self.remoting.invoke(address, request, timeout_ms), *ok)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.routes.close()  # unsubscribes (oneway) before the channels close
            self.remoting.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
