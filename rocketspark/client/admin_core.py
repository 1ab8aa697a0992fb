"""What every admin area shares: the cluster as the nameservers see it, and calls to its servers.

``AdminConnection`` is one connection to a cluster (nameservers, a remoting client, the route
cache, the user it signs as). The area clients (``Topics``, ``StaticTopics``, ``Groups``,
``Messages``, ``Acl``, ``Replicas``, ``Servers``) are each built on one and see it only
through the small protocols below, so each can be used, and faked, on its own; ``Admin``
is all of them over one connection::

    from rocketspark.client.admin_core import AdminConnection
    from rocketspark.client.topic_admin import Topics

    with AdminConnection("127.0.0.1:9876") as connection:
        print(connection.brokers())  # broker name -> address
        Topics(connection).create("orders", 8)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from rocketspark.client.queue_client import QueueClient
from rocketspark.errors import BrokerNotExistError, InvalidParameterError, TopicNotExistError
from rocketspark.protocol.bodies import unpack
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.types import TopicRouteData

if TYPE_CHECKING:
    from rocketspark.client.base import ClientBase
    from rocketspark.client.logical import LogicalQueue

C = TypeVar("C", bound="ClientBase")


class Caller(Protocol):
    """Calls a server and raises for any answer but SUCCESS and ``ok``."""

    def call(
        self, address: str, request: RemotingCommand, timeout_ms: int | None = None, *ok: int
    ) -> RemotingCommand: ...


class AdminCore(Caller, Protocol):
    """What an admin area asks of its connection: the cluster's servers and a topic's route."""

    @property
    def nameservers(self) -> list[str]: ...

    def cluster_list(self) -> dict[str, Any]: ...

    def brokers(self, cluster: str | None = None) -> dict[str, str]: ...

    def broker_named(self, broker_name: str) -> str: ...

    def topic_route(self, topic: str) -> TopicRouteData: ...

    def forget_route(self, topic: str) -> None: ...

    def nameserver_call(self, request: RemotingCommand) -> RemotingCommand: ...

    def nameserver_call_at(self, address: str | None, request: RemotingCommand) -> RemotingCommand: ...

    def each_nameserver(self, request_code: int, ext: dict[str, Any]) -> None: ...


class QueueCore(AdminCore, Protocol):
    """An ``AdminCore`` that also reads and moves a group's offsets on logical queues."""

    def queues(self, topic: str) -> list[LogicalQueue]: ...

    def min_offset(self, topic: str, queue_id: int, *, broker_name: str | None = None) -> int: ...

    def max_offset(self, topic: str, queue_id: int, *, broker_name: str | None = None) -> int: ...

    def offset_for_timestamp(
        self, topic: str, queue_id: int, timestamp_ms: int, *, broker_name: str | None = None
    ) -> int: ...

    def committed_offset(
        self, group: str, topic: str, queue_id: int, *, broker_name: str | None = None
    ) -> int | None: ...

    def commit_offset(
        self,
        group: str,
        topic: str,
        queue_id: int,
        offset: int,
        *,
        broker_name: str | None = None,
        reset_version: int | None = None,
    ) -> None: ...


class ClientCore(AdminCore, Protocol):
    """An ``AdminCore`` that also opens a producer or consumer connecting as it does."""

    timeout_ms: int

    def sibling(self, kind: type[C], **own: Any) -> C: ...


class MessageCore(QueueCore, ClientCore, Protocol):
    """Queues, their offsets, and a producer or consumer connecting as the admin does: what
    browsing a topic's messages and resending one ask of the connection."""


class AdminConnection(QueueClient):
    """One connection to a cluster, for the admin areas (it satisfies every protocol above).
    Use as a context manager or call ``close()``."""

    def cluster_list(self) -> dict[str, Any]:
        """Clusters, their brokers, addresses, permissions and heartbeat ages (one nameserver)."""
        response = self.nameserver_call(RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO))
        info: dict[str, Any] = unpack(response.body)
        return info

    def brokers(self, cluster: str | None = None) -> dict[str, str]:
        """Broker name -> address, optionally of one cluster."""
        info = self.cluster_list()
        if cluster is not None and cluster not in info["clusters"]:
            raise BrokerNotExistError(
                f'cluster "{cluster}" has no registered broker; known clusters: {", ".join(info["clusters"]) or "none"}'
            )
        names = info["clusters"][cluster] if cluster else list(info["brokers"])
        return {name: info["brokers"][name]["addr"] for name in names}

    def broker_named(self, broker_name: str) -> str:
        """The address of a registered broker; BrokerNotExistError names the known ones."""
        brokers = self.brokers()
        if broker_name not in brokers:
            raise BrokerNotExistError(
                f'broker "{broker_name}" is not registered with the nameserver; known brokers: '
                f"{', '.join(sorted(brokers)) or 'none'}"
            )
        return brokers[broker_name]

    def topic_route(self, topic: str) -> TopicRouteData:
        """The route as the nameserver has it now (not from the cache)."""
        try:
            return self.routes.fetch(topic)
        except TopicNotExistError as exc:
            raise TopicNotExistError(f'topic "{topic}" does not exist: {exc.message}') from None

    def forget_route(self, topic: str) -> None:
        """Drop the cached route, so the next use reads the change just made."""
        self.routes.invalidate(topic)

    def nameserver_call(self, request: RemotingCommand) -> RemotingCommand:
        """Ask any nameserver (moving on from one that does not answer)."""
        return self.routes.namesrv.call(request)

    def nameserver_call_at(self, address: str | None, request: RemotingCommand) -> RemotingCommand:
        """Ask one nameserver: ``address``, which must be one of this client's (default: the
        first), because the answer describes that server itself."""
        target = address or self.nameservers[0]
        if target not in self.nameservers:
            raise InvalidParameterError(f"{target} is not one of this client's nameservers: {self.nameservers}")
        return self.routes.namesrv.call_at(target, request)

    def each_nameserver(self, request_code: int, ext: dict[str, Any]) -> None:
        """Tell every nameserver (a change each keeps its own copy of)."""
        for address in self.nameservers:
            self.routes.namesrv.call_at(address, RemotingCommand.request(request_code, ext))
