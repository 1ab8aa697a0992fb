"""Admin operations, the ``mqadmin`` equivalents: topics, routes, status, cluster, permissions,
replica groups and switchover.

Changes go to every broker concerned and then to every nameserver, and each broker registers
the change with the nameservers before it answers, so a route query right after
``create_topic`` already sees the new topic.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rocketspark.client import acl_admin, ops_admin, static_admin
from rocketspark.client.acl_admin import AclChange, UserInfo
from rocketspark.client.logical import LogicalQueue, count, logical_view
from rocketspark.client.offsets import QueueClient
from rocketspark.client.ops_admin import GroupInfo, TopicInfo
from rocketspark.client.static_admin import RemapResult
from rocketspark.client.topic_stats import TopicStats, fetch_topic_stats, queue_bounds, segment_state, segment_stats
from rocketspark.errors import BrokerNotExistError, InvalidParameterError, TopicNotExistError
from rocketspark.protocol.bodies import unpack
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.replica import ReplicaGroup
from rocketspark.protocol.static_mapping import SegmentState
from rocketspark.protocol.types import MessageExt, Perm, SendResult, TopicRouteData
from rocketspark.protocol.validation import validate_topic_name
from rocketspark.security.acl import AclTable, Decision
from rocketspark.security.signing import Credentials


@dataclass(frozen=True, slots=True)
class SegmentStatus:
    """One segment of a logical queue: where it lives, its logical range and its state."""

    broker_name: str
    queue_id: int  # physical queue id on the broker
    gen: int
    logical_start: int
    logical_end: int | None  # None while open
    state: SegmentState
    min_offset: int  # physical offsets on the broker
    max_offset: int


@dataclass(frozen=True, slots=True)
class QueueStatus:
    """One logical queue of a topic as ``topic_status`` reports it (a normal topic's queues are
    logical queues of one segment each)."""

    queue_id: int  # logical queue id (what Consumer.pull takes)
    min_offset: int  # logical
    max_offset: int  # logical, one past the newest message
    last_store_ms: int  # store time of the newest message, 0 if empty
    segments: tuple[SegmentStatus, ...] = ()

    @property
    def broker_name(self) -> str:
        """The broker of the newest segment (the one taking writes)."""
        return self.segments[-1].broker_name if self.segments else ""

    @property
    def messages(self) -> int:
        return self.max_offset - self.min_offset


@dataclass(frozen=True, slots=True)
class ConsumerProgress:
    queue_id: int
    broker_name: str
    broker_offset: int  # max offset of the queue
    consumer_offset: int  # the group's committed offset, -1 if none
    lag: int  # messages after the committed offset (counted in segments: a remap's gap is no backlog)


def _queue_status(queue: LogicalQueue, stats: TopicStats) -> QueueStatus:
    segments = []
    for segment in queue.segments:
        row = segment_stats(segment, stats)
        segments.append(
            SegmentStatus(
                segment.broker_name,
                segment.queue_id,
                segment.gen,
                segment.logic_offset,
                segment.logical_end,
                segment_state(segment, row),
                row.min_offset,
                row.max_offset,
            )
        )
    low, high = queue_bounds(queue, stats)
    last_store = max((segment_stats(s, stats).last_store_ms for s in queue.segments), default=0)
    return QueueStatus(queue.queue_id, low, high, last_store, tuple(segments))


class Admin(QueueClient):
    # -- cluster ------------------------------------------------------------------------------

    def cluster_list(self) -> dict[str, Any]:
        """Clusters, their brokers, addresses, permissions and heartbeat ages (one nameserver)."""
        response = self.routes.namesrv.call(RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO))
        info: dict[str, Any] = unpack(response.body)
        return info

    def topics(self) -> list[str]:
        """Every topic the nameserver has a route for."""
        response = self.routes.namesrv.call(RemotingCommand.request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER))
        names: list[str] = unpack(response.body)
        return names

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
            self.routes.namesrv.call_at(address, RemotingCommand.request(request_code, ext))

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
        except TopicNotExistError:
            raise TopicNotExistError(
                f'topic "{topic}" exists on no broker and no nameserver: nothing was deleted (check its name: '
                "`rocketspark admin route <topic>` shows where a topic is)"
            ) from None
        names = [b.broker_name for b in route.brokers]
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
        """Per logical queue: min/max offset, newest store time, and each segment's broker,
        physical queue, logical range and state (Normal, ReadOnly, Expired)."""
        route = self.topic_route(topic)
        stats = fetch_topic_stats(self, route)
        return [_queue_status(queue, stats) for queue in logical_view(route)]

    def create_static_topic(self, topic: str, queues: int = 8, *, brokers: list[str] | None = None) -> RemapResult:
        """Create a static topic of ``queues`` logical queues, spread evenly over ``brokers``
        (default: every registered broker)."""
        return static_admin.create_static_topic(self, topic, queues, brokers)

    def remap_static_topic(
        self,
        topic: str,
        queues: list[int] | None = None,
        to_broker: str | None = None,
        *,
        total_queues: int | None = None,
    ) -> RemapResult:
        """Move logical ``queues`` to ``to_broker`` without copying data, and/or raise the
        queue count to ``total_queues`` (new queues go to ``to_broker``, else spread evenly)."""
        return static_admin.remap_static_topic(self, topic, queues, to_broker, total_queues)

    def drain_broker(
        self, broker_name: str, *, topics: list[str] | None = None, wipe_write_perm: bool = True
    ) -> list[RemapResult]:
        """Move every logical queue the broker leads to the other brokers; by default also wipe
        its write permission so normal topics stop writing to it. Its data stays readable."""
        results = static_admin.drain_broker(self, broker_name, topics)
        if wipe_write_perm:
            self.wipe_write_perm(broker_name)
        return results

    def consumer_progress(self, group: str, topic: str) -> list[ConsumerProgress]:
        """The group's committed offset and lag per (logical) queue: the max offsets come from
        one stats request per broker, the committed ones from each queue's broker. The brokers'
        ``rocketmq_consumer_lag_messages`` counts the same, for queues with a committed offset."""
        out = []
        queues = self.queues(topic)
        for status in self.topic_status(topic):
            committed = self.committed_offset(group, topic, status.queue_id)
            # without progress, a group is behind every message still stored (what
            # start_from="earliest" would read), not behind ones retention deleted
            start = status.min_offset if committed is None else committed
            lag = count(queues[status.queue_id], start, status.max_offset) if status.max_offset > start else 0
            out.append(
                ConsumerProgress(
                    status.queue_id, status.broker_name, status.max_offset, -1 if committed is None else committed, lag
                )
            )
        return out

    def describe_topics(self) -> list[TopicInfo]:
        """Every topic with its kind (normal, static, system), logical queues and brokers."""
        return ops_admin.describe_topics(self)

    def groups(self) -> list[GroupInfo]:
        """Every consumer group the brokers know: its topics, members and total lag."""
        return ops_admin.groups(self)

    def send_messages(
        self,
        topic: str,
        body: bytes,
        *,
        count: int = 1,
        tags: str | None = None,
        keys: list[str] | None = None,
    ) -> list[SendResult]:
        """Smoke test: send ``count`` messages (numbered if several) to an existing topic."""
        return ops_admin.send_messages(self, topic, body, count=count, tags=tags, keys=keys)

    def consume_messages(
        self, topic: str, *, count: int = 10, new: bool = False, wait_s: float = 3.0, tags: str | None = None
    ) -> list[MessageExt]:
        """Smoke test: read up to ``count`` messages without committing anything."""
        return ops_admin.consume_messages(self, topic, count=count, new=new, wait_s=wait_s, tags=tags)

    def reset_offset(
        self,
        group: str,
        topic: str,
        *,
        timestamp_ms: int | None = None,
        earliest: bool = False,
        latest: bool = False,
    ) -> dict[int, int]:
        """Move the group's offsets on ``topic`` to a time, the earliest or the latest message;
        its running ``GroupConsumer``s follow at their next heartbeat. Returns queue -> offset."""
        return ops_admin.reset_offsets(self, group, topic, timestamp_ms=timestamp_ms, earliest=earliest, latest=latest)

    # -- messages -----------------------------------------------------------------------------

    def query_messages(self, topic: str, key: str, *, max_messages: int = 32) -> list[MessageExt]:
        """The messages of ``topic`` sent with ``key`` (the brokers' key index), newest first."""
        return ops_admin.query_messages(self, topic, key, max_messages)

    def query_message_by_id(self, msg_id: str) -> MessageExt:
        """The message with this id: its client id (``MessageExt.msg_id``, ``SendResult.msg_id``,
        the Spark source's ``msgId``; found through the brokers' key indexes) or its offset id
        (``MessageExt.offset_msg_id``: it names its broker and position). MessageNotFoundError
        says why neither found it."""
        return ops_admin.query_message_by_id(self, msg_id)

    # -- replica groups (the controller) -------------------------------------------------------

    def replica_groups(self) -> dict[str, ReplicaGroup]:
        """Every replica group the controller knows: master, epoch, SyncStateSet, and each
        replica's role, last reported offset and lag (as one nameserver saw the heartbeats)."""
        response = self.routes.namesrv.call(RemotingCommand.request(RequestCode.CONTROLLER_GET_SYNC_STATE_DATA))
        groups: dict[str, Any] = unpack(response.body)["groups"]
        return {name: ReplicaGroup.from_wire(view) for name, view in groups.items()}

    def replica_group(self, group: str) -> ReplicaGroup:
        request = RemotingCommand.request(RequestCode.CONTROLLER_GET_REPLICA_INFO, {"brokerName": group})
        return ReplicaGroup.from_wire(unpack(self.routes.namesrv.call(request).body))

    def switchover(self, group: str, to: str) -> ReplicaGroup:
        """Hand ``group`` over to its replica at address ``to`` (planned; it must be alive and in
        the SyncStateSet). Returns the group as the controller left it: ``to`` is master, at a
        new epoch."""
        current = self.replica_group(group)
        target = next((r for r in current.replicas if r.address == to), None)
        if target is None:
            raise InvalidParameterError(
                f'replica group "{group}" has no replica at {to}; its replicas: '
                f"{', '.join(f'{r.address} ({r.role})' for r in current.replicas) or 'none'}"
            )
        ext = {"brokerName": group, "replicaId": target.replica_id}
        response = self.routes.namesrv.call(RemotingCommand.request(RequestCode.CONTROLLER_ELECT_MASTER, ext))
        return ReplicaGroup.from_wire(unpack(response.body))

    def controller_metadata(self, address: str | None = None) -> dict[str, Any]:
        """One nameserver's controller as it sees itself (mqadmin ``getControllerMetaData``):
        ``controllerLeaderAddress`` (the Raft leader it last heard), ``isLeader``, ``self``,
        ``peers``, ``term`` and ``hasQuorum``."""
        response = self.routes.namesrv.call_at(
            self._nameserver(address), RemotingCommand.request(RequestCode.CONTROLLER_GET_METADATA_INFO)
        )
        metadata: dict[str, Any] = unpack(response.body)
        return metadata

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
        response = self.routes.namesrv.call_at(
            self._nameserver(address), RemotingCommand.request(RequestCode.GET_COUNTERS)
        )
        counters: dict[str, Any] = unpack(response.body)
        return counters

    # -- users and policies (rocketspark.client.acl_admin: every server gets the change) ----------

    def create_user(self, name: str, secret: str, *, super_user: bool = False) -> AclChange:
        """A new user signing as ``name`` with ``secret``; a super user may do anything."""

        def edit(table: AclTable) -> AclTable:
            if name in table.users:
                raise InvalidParameterError(f'user "{name}" exists already: use update_user to change it')
            return table.with_user(name, Credentials(name, secret).secret_key, acl_admin.user_type(super_user))

        return acl_admin.change(self, edit)

    def update_user(self, name: str, secret: str | None = None, *, super_user: bool | None = None) -> AclChange:
        """A new secret, or type, for an existing user (its policies stay)."""

        def edit(table: AclTable) -> AclTable:
            old = table.users.get(name)
            if old is None:
                raise InvalidParameterError(f'there is no user "{name}": create it first')
            kind = old.type if super_user is None else acl_admin.user_type(super_user)
            return table.with_user(name, secret or old.secret, kind)

        return acl_admin.change(self, edit)

    def delete_user(self, name: str) -> AclChange:
        return acl_admin.change(self, lambda table: table.without_user(name))

    def set_acl(self, user: str, resource: str, actions: list[str], *, decision: str = "Allow") -> AclChange:
        """Give ``user`` ``actions`` on ``resource`` (Topic:<name or prefix*>, Group:<name or
        prefix*>, Cluster), allowed or denied; replaces the user's policy on that resource."""
        try:
            verdict = Decision(decision)
        except ValueError:
            raise InvalidParameterError(f'decision "{decision}" must be Allow or Deny') from None
        return acl_admin.change(self, lambda table: table.with_policy(user, resource, actions, verdict))

    def delete_acl(self, user: str, resource: str) -> AclChange:
        return acl_admin.change(self, lambda table: table.without_policy(user, resource))

    def users(self) -> list[UserInfo]:
        """Every user with its type and policies (never a secret)."""
        return acl_admin.users(self)

    def _nameserver(self, address: str | None) -> str:
        """``address`` if it is one of this client's nameservers (default: the first)."""
        target = address or self.nameservers[0]
        if target not in self.nameservers:
            raise InvalidParameterError(f"{target} is not one of this client's nameservers: {self.nameservers}")
        return target
