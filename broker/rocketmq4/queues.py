"""The queues a RocketMQ 4.x request names, served as ours.

A normal topic's queue is one of this broker's: the request is translated into ours and served
by our own handler, in this process (``dispatcher.serve_translated``: the same permission rule
and the same code as for our clients). A static topic's queue is a logical queue whose segments
may be on any broker: it is read, written and committed through our own client library, as the
rocketspark Consumer and Producer do (the v2 endpoint serves the official RocketMQ 5 clients
the same way), after the request is authorized here. Either way the 4.x client sees one queue
with one run of offsets, whatever remaps happen under it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from broker.static_topics import StaticTopics
from rocketspark.client.admin import Admin
from rocketspark.client.consumer import Consumer
from rocketspark.client.producer import Producer
from rocketspark.codec import ids
from rocketspark.codec.messages import read_messages
from rocketspark.codec.source import Source
from rocketspark.grpcv2.clients import in_thread
from rocketspark.protocol.codes import RequestCode, ResponseCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.types import MessageExt, PullStatus
from rocketspark.remoting.server import Dispatcher


class Clients(Protocol):
    """Our own clients of the cluster (``rocketspark.grpcv2.clients.EndpointClients``)."""

    @property
    def consumer(self) -> Consumer: ...
    @property
    def producer(self) -> Producer: ...
    @property
    def admin(self) -> Admin: ...


@dataclass(frozen=True, slots=True)
class Stored:
    queue_id: int
    queue_offset: int
    offset_msg_id: str  # of the (first) message stored: where, on which broker

    def offset_msg_ids(self, count: int) -> list[str]:
        """The offset ids of ``count`` messages stored as one batch, the first being this one's."""
        first = ids.parse_offset_msg_id(self.offset_msg_id)
        host = ids.store_host(first.address)
        return [ids.offset_msg_id_at(host, first.physical + i) for i in range(count)]


@dataclass(frozen=True, slots=True)
class Pulled:
    code: int  # ResponseCode: SUCCESS, PULL_NOT_FOUND, PULL_RETRY_IMMEDIATELY, PULL_OFFSET_MOVED
    next_offset: int
    min_offset: int
    max_offset: int
    messages: list[MessageExt]  # from the requested offset on, in order (filtered ones left out)
    held: float = 0.0  # seconds a long poll held the pull (not its latency)


_STATUS_CODES = {
    PullStatus.FOUND: ResponseCode.SUCCESS,
    PullStatus.NO_NEW_MSG: ResponseCode.PULL_NOT_FOUND,
    PullStatus.NO_MATCHED_MSG: ResponseCode.PULL_RETRY_IMMEDIATELY,
    PullStatus.OFFSET_ILLEGAL: ResponseCode.PULL_OFFSET_MOVED,
}


def client_labels(request: RemotingCommand, group_field: str, group: str, via: str = "") -> dict[str, object]:
    """Who a 4.x client's request came from, in the fields our handlers record for message
    trace: its connection's address, its group, how it reads."""
    labels: dict[str, object] = {group_field: group} if group else {}
    if request.channel is not None:
        labels["clientHost"] = f"{request.channel.peer} ({request.language or 'RocketMQ 4.x client'})"
    if via:
        labels["via"] = via
    return labels


class Queues:
    """Where each request of a 4.x client goes: ours, or the cluster's through our clients."""

    def __init__(
        self,
        broker_name: str,
        dispatcher: Dispatcher,
        static: StaticTopics,
        clients: Clients,
        address: Callable[[], str],
    ) -> None:
        self.broker_name = broker_name
        self.address = address  # this broker's host:port, as its messages' offset ids name it
        self.dispatcher = dispatcher
        self.static = static
        self.clients = clients

    def is_static(self, topic: str) -> bool:
        return self.static.is_static(topic)

    async def ours(self, code: int, ext: dict[str, object], user: str | None, body: bytes = b"") -> RemotingCommand:
        return await self.dispatcher.serve_translated(RemotingCommand(code, ext=ext, body=body), user)

    def authorize(self, code: int, ext: dict[str, object], user: str | None) -> None:
        """Whether ``user`` may do what our request ``code`` with ``ext`` does (a static topic's
        request goes out with the cluster's credential, so it is authorized here first)."""
        self.dispatcher.authorize(RemotingCommand(code, ext=ext), user)

    # -- writing ---------------------------------------------------------------------------

    async def send(self, topic: str, queue_id: int, record: bytes, user: str | None, **ext: object) -> Stored:
        """Store ``record``; ``ext``: more of our SEND_MESSAGE's fields (the auto-create
        template, who sends for message trace: ``client_labels``)."""
        if self.is_static(topic):
            self.authorize(RequestCode.SEND_MESSAGE, {"topic": topic}, user)
            result = await in_thread(self.clients.producer.send_to_queue, topic, queue_id, record)
            return Stored(result.queue_id, result.queue_offset, result.offset_msg_id)
        answer = await self.ours(RequestCode.SEND_MESSAGE, {"topic": topic, "queueId": queue_id, **ext}, user, record)
        return Stored(int(answer.ext["queueId"]), int(answer.ext["queueOffset"]), str(answer.ext["msgId"]))

    # -- reading ---------------------------------------------------------------------------

    async def pull(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_messages: int,
        tags: list[str] | None,
        suspend_ms: int,
        user: str | None,
        sql: str | None = None,
        labels: dict[str, object] | None = None,
    ) -> Pulled:
        """A read of one queue; ``labels``: who reads, for message trace (``client_labels``)."""
        if self.is_static(topic):
            self.authorize(RequestCode.PULL_MESSAGE, {"topic": topic, "queueId": queue_id, "queueOffset": offset}, user)
            result = await in_thread(
                self.clients.consumer.pull,
                topic,
                queue_id,
                offset,
                max_messages,
                tags=tags,
                sql=sql,
                long_poll_ms=suspend_ms,
            )
            wanted = [m for m in result.messages if m.queue_offset >= offset]
            return Pulled(
                _STATUS_CODES[result.status], result.next_offset, result.min_offset, result.max_offset, wanted
            )
        ext: dict[str, object] = {
            "topic": topic,
            "queueId": queue_id,
            "queueOffset": offset,
            "maxMsgNums": max_messages,
            "suspendTimeoutMs": suspend_ms,
        }
        if tags:
            ext["tags"] = tags
        if sql:
            ext["sql"] = sql  # the broker answers only batches holding a match
        ours = RemotingCommand(RequestCode.PULL_MESSAGE, ext={**ext, **(labels or {})})
        answer = await self.dispatcher.serve_translated(ours, user)
        messages: list[MessageExt] = []
        if answer.code == ResponseCode.SUCCESS:
            source = Source(topic, queue_id, 0, self.broker_name, ids.store_host(self.address()))
            messages = read_messages(answer.body, source, verify=True, first=offset, stop=None, wanted=tags)
        next_offset, low, high = int(answer.ext["next"]), int(answer.ext["min"]), int(answer.ext["max"])
        return Pulled(answer.code, next_offset, low, high, messages, ours.held)

    async def offset(self, code: int, topic: str, queue_id: int, user: str | None, **extra: object) -> int:
        """GET_MAX_OFFSET, GET_MIN_OFFSET or SEARCH_OFFSET_BY_TIMESTAMP (``timestamp``)."""
        if self.is_static(topic):
            self.authorize(code, {"topic": topic, "queueId": queue_id, **extra}, user)
            consumer = self.clients.consumer
            if code == RequestCode.GET_MAX_OFFSET:
                return await in_thread(consumer.max_offset, topic, queue_id)
            if code == RequestCode.GET_MIN_OFFSET:
                return await in_thread(consumer.min_offset, topic, queue_id)
            return await in_thread(consumer.offset_for_timestamp, topic, queue_id, int(str(extra["timestamp"])))
        answer = await self.ours(code, {"topic": topic, "queueId": queue_id, **extra}, user)
        return int(answer.ext["offset"])

    # -- a group's progress ---------------------------------------------------------------

    async def committed(self, group: str, topic: str, queue_id: int, user: str | None) -> int | None:
        ext: dict[str, object] = {"consumerGroup": group, "topic": topic, "queueId": queue_id}
        if self.is_static(topic):
            self.authorize(RequestCode.QUERY_CONSUMER_OFFSET, ext, user)
            return await in_thread(self.clients.consumer.committed_offset, group, topic, queue_id)
        answer = await self.ours(RequestCode.QUERY_CONSUMER_OFFSET, ext, user)
        return None if answer.code == ResponseCode.QUERY_NOT_FOUND else int(answer.ext["offset"])

    async def commit(
        self, group: str, topic: str, queue_id: int, offset: int, user: str | None, labels: dict[str, object]
    ) -> None:
        ext: dict[str, object] = {**labels, "consumerGroup": group, "topic": topic, "queueId": queue_id}
        ext["commitOffset"] = offset
        if self.is_static(topic):
            self.authorize(RequestCode.UPDATE_CONSUMER_OFFSET, ext, user)
            await in_thread(self.clients.consumer.commit_offset, group, topic, queue_id, offset)
            return
        await self.ours(RequestCode.UPDATE_CONSUMER_OFFSET, ext, user)

    # -- queue locks (orderly consumers) ------------------------------------------------------

    async def lock(self, code: int, ext: dict[str, object], user: str | None) -> str:
        """LOCK_BATCH_MQ or UNLOCK_BATCH_MQ of one queue; the holder after a lock."""
        topic, group, client_id = str(ext["topic"]), str(ext["consumerGroup"]), str(ext["clientId"])
        queue_id = int(str(ext["queueId"]))
        if self.is_static(topic):
            self.authorize(code, ext, user)
            consumer = self.clients.consumer
            if code == RequestCode.LOCK_BATCH_MQ:
                return await in_thread(consumer.lock_queue, group, client_id, topic, queue_id)
            await in_thread(consumer.unlock_queue, group, client_id, topic, queue_id)
            return ""
        answer = await self.ours(code, ext, user)
        return str(answer.ext.get("holder", ""))
