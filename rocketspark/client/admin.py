"""Admin operations, the ``mqadmin`` equivalents: topics, routes, status, cluster, permissions.

Changes go to every broker concerned and then to every nameserver, and each broker registers
the change with the nameservers before it answers, so a route query right after
``create_topic`` already sees the new topic.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rocketspark.client.base import ClientBase
from rocketspark.client.routes import read_queues
from rocketspark.errors import BrokerNotExistError, InvalidParameterError, TopicNotExistError
from rocketspark.protocol.codec import unpack
from rocketspark.protocol.codes import RequestCode, ResponseCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.types import Perm, TopicRouteData
from rocketspark.protocol.validation import validate_topic_name
from rocketspark.remoting.client import check


@dataclass(frozen=True, slots=True)
class QueueStatus:
    """One queue of a topic as ``topic_status`` reports it."""

    queue_id: int  # index in the topic's queue view (what Consumer.pull takes)
    broker_name: str
    physical_queue_id: int
    min_offset: int
    max_offset: int
    last_store_ms: int  # store time of the newest message, 0 if empty

    @property
    def messages(self) -> int:
        return self.max_offset - self.min_offset


@dataclass(frozen=True, slots=True)
class ConsumerProgress:
    queue_id: int
    broker_name: str
    broker_offset: int  # max offset of the queue
    consumer_offset: int  # the group's committed offset, -1 if none

    @property
    def lag(self) -> int:
        return self.broker_offset - max(self.consumer_offset, 0)


class Admin(ClientBase):
    # -- cluster ------------------------------------------------------------------------------

    def cluster_list(self) -> dict[str, Any]:
        """Clusters, their brokers, addresses, permissions and heartbeat ages (one nameserver)."""
        response = self.routes.call_nameserver(RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO))
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

    def _broker_address(self, broker_name: str) -> str:
        brokers = self.brokers()
        if broker_name not in brokers:
            raise BrokerNotExistError(
                f'broker "{broker_name}" is not registered with the nameserver; known brokers: '
                f"{', '.join(sorted(brokers)) or 'none'}"
            )
        return brokers[broker_name]

    def _each_nameserver(self, request_code: int, ext: dict[str, Any]) -> None:
        for address in self.nameservers:
            request = RemotingCommand.request(request_code, ext)
            self.call_nameserver_at(address, request)

    def call_nameserver_at(self, address: str, request: RemotingCommand, *ok: int) -> RemotingCommand:
        return check(self.remoting.invoke(address, request, None, peer="nameserver"), *ok)

    # -- topics -------------------------------------------------------------------------------

    def create_topic(
        self,
        topic: str,
        queues: int = 8,
        *,
        brokers: list[str] | None = None,
        cluster: str | None = None,
        read_queues: int | None = None,
        perm: int = Perm.READ_WRITE,
    ) -> list[str]:
        """Create or update a normal topic on the given brokers (default: every broker, or every
        broker of ``cluster``). Returns the brokers it was created on."""
        validate_topic_name(topic)
        known = self.brokers(cluster)
        targets = list(brokers) if brokers else sorted(known)
        missing = [b for b in targets if b not in known]
        if missing:
            raise BrokerNotExistError(
                f"broker(s) {', '.join(missing)} not registered; known brokers: {', '.join(sorted(known)) or 'none'}"
            )
        if not targets:
            raise BrokerNotExistError("no broker is registered with the nameserver; start a broker first")
        ext = {"topic": topic, "writeQueueNums": queues, "readQueueNums": read_queues or queues, "perm": perm}
        for name in targets:
            self.call(known[name], RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, ext))
        self.routes.invalidate(topic)
        return targets

    def delete_topic(self, topic: str) -> list[str]:
        """Delete a topic from every broker that has it, then from every nameserver."""
        try:
            route = self.routes.fetch(topic)
            names = [b.broker_name for b in route.brokers]
        except TopicNotExistError:
            names = []
        brokers = self.brokers()
        for name in names:
            if name in brokers:
                self.call(brokers[name], RemotingCommand.request(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": topic}))
        self._each_nameserver(RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": topic})
        self.routes.invalidate(topic)
        return names

    def topic_route(self, topic: str) -> TopicRouteData:
        """The route as the nameserver has it now (not from the cache)."""
        try:
            return self.routes.fetch(topic)
        except TopicNotExistError as exc:
            raise TopicNotExistError(f'topic "{topic}" does not exist: {exc.message}') from None

    def topic_status(self, topic: str) -> list[QueueStatus]:
        """Per queue: broker, min/max offset and the newest message's store time."""
        route = self.topic_route(topic)
        stats: dict[str, dict[int, dict[str, int]]] = {}
        for broker in route.brokers:
            request = RemotingCommand.request(RequestCode.GET_TOPIC_STATS_INFO, {"topic": topic})
            rows = unpack(self.call(broker.address, request).body)
            stats[broker.broker_name] = {r["queueId"]: r for r in rows}
        out = []
        for index, ref in enumerate(read_queues(route)):
            row = stats.get(ref.broker_name, {}).get(ref.queue_id, {"min": 0, "max": 0, "lastStoreMs": 0})
            out.append(QueueStatus(index, ref.broker_name, ref.queue_id, row["min"], row["max"], row["lastStoreMs"]))
        return out

    def consumer_progress(self, group: str, topic: str) -> list[ConsumerProgress]:
        """The group's committed offset and lag per queue."""
        route = self.topic_route(topic)
        out = []
        for index, ref in enumerate(read_queues(route)):
            address = self.broker_address(route, ref.broker_name)
            ext = {"topic": topic, "queueId": ref.queue_id}
            high = int(self.call(address, RemotingCommand.request(RequestCode.GET_MAX_OFFSET, ext)).ext["offset"])
            query = RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET, {**ext, "consumerGroup": group})
            response = self.call(address, query, None, ResponseCode.QUERY_NOT_FOUND)
            committed = -1 if response.code == ResponseCode.QUERY_NOT_FOUND else int(response.ext["offset"])
            out.append(ConsumerProgress(index, ref.broker_name, high, committed))
        return out

    # -- brokers ------------------------------------------------------------------------------

    def wipe_write_perm(self, broker_name: str) -> None:
        """Stop new writes to a broker (graceful drain); reads continue."""
        self._set_write_perm(broker_name, writable=False)

    def add_write_perm(self, broker_name: str) -> None:
        self._set_write_perm(broker_name, writable=True)

    def _set_write_perm(self, broker_name: str, *, writable: bool) -> None:
        address = self._broker_address(broker_name)
        perm = Perm.READ_WRITE if writable else Perm.READ
        self.call(address, RemotingCommand.request(RequestCode.UPDATE_BROKER_CONFIG, {"brokerPermission": perm}))
        code = RequestCode.ADD_WRITE_PERM_OF_BROKER if writable else RequestCode.WIPE_WRITE_PERM_OF_BROKER
        self._each_nameserver(code, {"brokerName": broker_name})

    def broker_runtime(self, broker_name: str) -> dict[str, Any]:
        response = self.call(
            self._broker_address(broker_name), RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO)
        )
        info: dict[str, Any] = unpack(response.body)
        return info

    def broker_counters(self, broker_name: str) -> dict[str, Any]:
        """Requests served by code, messages and bytes stored, and more."""
        response = self.call(self._broker_address(broker_name), RemotingCommand.request(RequestCode.GET_COUNTERS))
        counters: dict[str, Any] = unpack(response.body)
        return counters

    def nameserver_counters(self, address: str | None = None) -> dict[str, Any]:
        """Requests served by code (route queries are code 105), brokers, topics."""
        target = address or self.nameservers[0]
        if target not in self.nameservers:
            raise InvalidParameterError(f"{target} is not one of this client's nameservers: {self.nameservers}")
        response = self.call_nameserver_at(target, RemotingCommand.request(RequestCode.GET_COUNTERS))
        counters: dict[str, Any] = unpack(response.body)
        return counters
