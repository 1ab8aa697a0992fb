"""Admin operations, the ``mqadmin`` equivalents, over one connection: a facade of the area
clients, each of which a user can also build on its own connection (``admin_core``).

====================  =====================================  ===============================
attribute             area                                   module
====================  =====================================  ===============================
``topics``            normal topics, routes, queue status    ``topic_admin``
``static_topics``     static topics: create, remap, drain    ``static_admin``
``groups``            consumer groups, lag, offset resets    ``group_admin``
``messages``          messages by key or id, smoke tests     ``message_admin``
``acl``               users and policies                     ``acl_admin``
``replicas``          replica groups, switchover             ``replica_admin``
``servers``           write permission, counters             ``server_admin``
``connections``       who is connected, per client group     ``connection_admin``
====================  =====================================  ===============================

``admin.topics()`` lists the topics and ``admin.groups()`` the groups, as they always did;
``admin.topics.create(...)`` reaches the area. The flat methods below (``create_topic`` and
the rest, what the CLI, the console and the Spark code call) delegate to the areas. The
cluster-wide views (``cluster_list``, ``brokers``, ``topic_route``) and the queue offsets
(``queues``, ``committed_offset``, ``commit_offset`` ...) come from the connection itself.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

from rocketspark.client.acl_admin import Acl, AclChange, UserInfo
from rocketspark.client.admin_core import AdminConnection
from rocketspark.client.browse import DEFAULT_LIMIT, MessagePage, browse_messages
from rocketspark.client.connection_admin import ClientConnection, Connections, Subscribed
from rocketspark.client.group_admin import ConsumerProgress, GroupInfo, Groups
from rocketspark.client.message_admin import CONSUME_COUNT, CONSUME_WAIT_S, QUERY_MAX_MESSAGES, SEND_COUNT, Messages
from rocketspark.client.replica_admin import Replicas
from rocketspark.client.retry_admin import GroupTopic, group_topics, resend_message
from rocketspark.client.server_admin import Servers
from rocketspark.client.static_admin import RemapResult, StaticTopics
from rocketspark.client.topic_admin import DEFAULT_QUEUES, QueueStatus, SegmentStatus, TopicInfo, Topics
from rocketspark.client.trace_admin import message_trace, trace_of
from rocketspark.protocol.replica import ReplicaGroup
from rocketspark.protocol.trace import TraceEvent
from rocketspark.protocol.types import MessageExt, Perm, SendResult, TopicConfig
from rocketspark.security.acl import Decision

__all__ = [
    "Admin",
    "ClientConnection",
    "ConsumerProgress",
    "GroupInfo",
    "GroupTopic",
    "MessagePage",
    "QueueStatus",
    "SegmentStatus",
    "Subscribed",
    "TopicInfo",
]


class Admin(AdminConnection):
    """Every admin area over one connection. Use as a context manager or call ``close()``."""

    # -- the areas ----------------------------------------------------------------------------

    @cached_property
    def topics(self) -> Topics:
        return Topics(self)

    @cached_property
    def static_topics(self) -> StaticTopics:
        return StaticTopics(self)

    @cached_property
    def groups(self) -> Groups:
        return Groups(self)

    @cached_property
    def messages(self) -> Messages:
        return Messages(self)

    @cached_property
    def acl(self) -> Acl:
        return Acl(self)

    @cached_property
    def replicas(self) -> Replicas:
        return Replicas(self)

    @cached_property
    def servers(self) -> Servers:
        return Servers(self)

    @cached_property
    def connections(self) -> Connections:
        return Connections(self)

    # -- topics -------------------------------------------------------------------------------

    def create_topic(
        self,
        topic: str,
        queues: int = DEFAULT_QUEUES,
        *,
        brokers: list[str] | None = None,
        cluster: str | None = None,
        read_queues: int | None = None,
        perm: int = Perm.READ_WRITE,
        trace: bool = False,
    ) -> list[str]:
        """``topics.create``: a normal topic on ``brokers`` (default: every broker, or every
        broker of ``cluster``), its messages traced with ``trace``; the brokers it was created on."""
        return self.topics.create(
            topic, queues, brokers=brokers, cluster=cluster, read_queues=read_queues, perm=perm, trace=trace
        )

    def delete_topic(self, topic: str) -> list[str]:
        """``topics.delete``: from every broker that has it, then from every nameserver."""
        return self.topics.delete(topic)

    def topic_status(self, topic: str) -> list[QueueStatus]:
        """``topics.status``: per logical queue, its offsets and segments."""
        return self.topics.status(topic)

    def describe_topics(self) -> list[TopicInfo]:
        """``topics.describe``: every topic with its kind, logical queues and brokers."""
        return self.topics.describe()

    def topic_config(self, topic: str) -> dict[str, TopicConfig]:
        """``topics.config``: the topic's config as each broker that has it holds it, by broker
        name (queue counts, permission, trace flag)."""
        return self.topics.config(topic)

    # -- static topics ------------------------------------------------------------------------

    def create_static_topic(
        self, topic: str, queues: int = DEFAULT_QUEUES, *, brokers: list[str] | None = None
    ) -> RemapResult:
        """``static_topics.create``: ``queues`` logical queues spread evenly over ``brokers``."""
        return self.static_topics.create(topic, queues, brokers=brokers)

    def remap_static_topic(
        self,
        topic: str,
        queues: list[int] | None = None,
        to_broker: str | None = None,
        *,
        total_queues: int | None = None,
    ) -> RemapResult:
        """``static_topics.remap``: move logical ``queues`` to ``to_broker`` without copying
        data, and/or raise the queue count to ``total_queues``."""
        return self.static_topics.remap(topic, queues, to_broker, total_queues=total_queues)

    def drain_broker(
        self, broker_name: str, *, topics: list[str] | None = None, wipe_write_perm: bool = True
    ) -> list[RemapResult]:
        """``static_topics.drain_broker``: every logical queue the broker leads moves to the
        others; by default its write permission is wiped too."""
        return self.static_topics.drain_broker(broker_name, topics=topics, wipe_write_perm=wipe_write_perm)

    # -- groups -------------------------------------------------------------------------------

    def consumer_progress(self, group: str, topic: str) -> list[ConsumerProgress]:
        """``groups.progress``: the group's committed offset and lag per (logical) queue."""
        return self.groups.progress(group, topic)

    def reset_offset(
        self,
        group: str,
        topic: str,
        *,
        timestamp_ms: int | None = None,
        earliest: bool = False,
        latest: bool = False,
    ) -> dict[int, int]:
        """``groups.reset_offset``: move the group's offsets on ``topic`` to a time, the earliest
        or the latest message; its running consumers follow. Returns queue -> offset."""
        return self.groups.reset_offset(group, topic, timestamp_ms=timestamp_ms, earliest=earliest, latest=latest)

    # -- client connections -------------------------------------------------------------------

    def consumer_connections(self, group: str) -> list[ClientConnection]:
        """``connections.consumers``: the consumer group's clients over every broker (address,
        language, version, protocol, subscriptions), sorted by client id; [] when none."""
        return self.connections.consumers(group)

    def producer_connections(self, group: str) -> list[ClientConnection]:
        """``connections.producers``: the producer group's clients over every broker."""
        return self.connections.producers(group)

    def producer_groups(self) -> dict[str, list[ClientConnection]]:
        """``connections.producer_groups``: every producer group any broker knows, sorted."""
        return self.connections.producer_groups()

    # -- messages -----------------------------------------------------------------------------

    def send_messages(
        self,
        topic: str,
        body: bytes,
        *,
        count: int = SEND_COUNT,
        tags: str | None = None,
        keys: list[str] | None = None,
    ) -> list[SendResult]:
        """``messages.send``: smoke test, ``count`` messages to an existing topic."""
        return self.messages.send(topic, body, count=count, tags=tags, keys=keys)

    def consume_messages(
        self,
        topic: str,
        *,
        count: int = CONSUME_COUNT,
        new: bool = False,
        wait_s: float = CONSUME_WAIT_S,
        tags: str | None = None,
    ) -> list[MessageExt]:
        """``messages.consume``: smoke test, up to ``count`` messages, nothing committed."""
        return self.messages.consume(topic, count=count, new=new, wait_s=wait_s, tags=tags)

    def query_messages(self, topic: str, key: str, *, max_messages: int = QUERY_MAX_MESSAGES) -> list[MessageExt]:
        """``messages.query``: the messages of ``topic`` sent with ``key``, newest first."""
        return self.messages.query(topic, key, max_messages=max_messages)

    def query_message_by_id(self, msg_id: str) -> MessageExt:
        """``messages.by_id``: the message with this client id or offset id."""
        return self.messages.by_id(msg_id)

    def message_trace(self, msg_id: str) -> list[TraceEvent]:
        """What the brokers recorded of the message with this client id or offset id (its topic
        traced: ``create_topic(..., trace=True)`` or the brokers' ``trace_enable``): sent, stored,
        delivered to each group..., oldest first."""
        return message_trace(self, msg_id)

    def trace_of(self, message: MessageExt) -> list[TraceEvent]:
        """``message_trace`` of a message already in hand (from ``query_message_by_id`` or
        ``browse_messages``), without looking it up again."""
        return trace_of(self, message)

    def browse_messages(
        self,
        topic: str,
        *,
        start_ms: int | None = None,
        end_ms: int | None = None,
        limit: int = DEFAULT_LIMIT,
        cursor: str | None = None,
    ) -> MessagePage:
        """The messages of ``topic`` stored in ``[start_ms, end_ms)`` (None: unbounded), newest
        first, ``limit`` (1-200) a page; pass the page's ``cursor`` back for the next, older,
        page (None: no more). See :mod:`rocketspark.client.browse`."""
        return browse_messages(self, topic, start_ms=start_ms, end_ms=end_ms, limit=limit, cursor=cursor)

    def resend_message(self, msg_id: str, group: str) -> SendResult:
        """A copy of the message with this id sent to ``group``'s retry topic, so that only that
        group consumes it again (group consumers, RocketMQ 4.x push consumers; not RocketMQ 5 pop
        consumers). See :mod:`rocketspark.client.retry_admin`."""
        return resend_message(self, msg_id, group)

    def group_topics(self) -> list[GroupTopic]:
        """Every group's retry (``%RETRY%``) and dead-letter (``%DLQ%``) topic, with the
        messages stored in it now, sorted by topic."""
        return group_topics(self)

    # -- replica groups (the controller) -------------------------------------------------------

    def replica_groups(self) -> dict[str, ReplicaGroup]:
        """``replicas.groups``: every replica group the controller knows."""
        return self.replicas.groups()

    def replica_group(self, group: str) -> ReplicaGroup:
        return self.replicas.group(group)

    def switchover(self, group: str, to: str) -> ReplicaGroup:
        """``replicas.switchover``: hand ``group`` over to its replica at address ``to``."""
        return self.replicas.switchover(group, to)

    def controller_metadata(self, address: str | None = None) -> dict[str, Any]:
        """``replicas.controller_metadata``: one nameserver's controller as it sees itself."""
        return self.replicas.controller_metadata(address)

    # -- servers ------------------------------------------------------------------------------

    def wipe_write_perm(self, broker_name: str) -> None:
        """``servers.wipe_write_perm``: stop new writes to a broker; reads continue."""
        self.servers.wipe_write_perm(broker_name)

    def add_write_perm(self, broker_name: str) -> None:
        self.servers.add_write_perm(broker_name)

    def broker_runtime(self, broker_name: str) -> dict[str, Any]:
        return self.servers.broker_runtime(broker_name)

    def broker_counters(self, broker_name: str) -> dict[str, Any]:
        """``servers.broker_counters``: requests served by code, messages and bytes stored."""
        return self.servers.broker_counters(broker_name)

    def nameserver_counters(self, address: str | None = None) -> dict[str, Any]:
        """``servers.nameserver_counters``: requests served by code, brokers, topics."""
        return self.servers.nameserver_counters(address)

    def metrics_urls(self) -> dict[str, str]:
        """``servers.metrics_urls``: each server's ``/metrics`` URL, by nameserver address and
        broker name ("" for one that serves none or did not answer)."""
        return self.servers.metrics_urls(sorted(self.cluster_list()["brokers"]))

    # -- users and policies -------------------------------------------------------------------

    def create_user(self, name: str, secret: str, *, super_user: bool = False) -> AclChange:
        """``acl.create_user``: a new user signing as ``name`` with ``secret``."""
        return self.acl.create_user(name, secret, super_user=super_user)

    def update_user(self, name: str, secret: str | None = None, *, super_user: bool | None = None) -> AclChange:
        """``acl.update_user``: a new secret, or type, for an existing user."""
        return self.acl.update_user(name, secret, super_user=super_user)

    def delete_user(self, name: str) -> AclChange:
        return self.acl.delete_user(name)

    def set_acl(self, user: str, resource: str, actions: list[str], *, decision: str = Decision.ALLOW) -> AclChange:
        """``acl.set_acl``: ``actions`` on ``resource`` for ``user``, allowed or denied."""
        return self.acl.set_acl(user, resource, actions, decision=decision)

    def delete_acl(self, user: str, resource: str) -> AclChange:
        return self.acl.delete_acl(user, resource)

    def users(self) -> list[UserInfo]:
        """``acl.users``: every user with its type and policies (never a secret)."""
        return self.acl.users()
