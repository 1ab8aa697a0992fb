"""Logical queues and their offsets: what the consumer, the group consumer and the admin share.

``QueueClient`` answers "which logical queues does this topic have" from the route cache
(the view is built once per route) and asks brokers for a queue's offsets and a consumer
group's committed progress. The pull consumer adds reading on top; the admin uses it for
``consumer_progress`` with its own connections instead of a consumer of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from rocketspark.client.base import ClientBase
from rocketspark.client.logical import LogicalQueue, Segment, logical_view, physical_queue
from rocketspark.client.pulling import segment_request_ext
from rocketspark.errors import (
    ConnectError,
    InvalidParameterError,
    MappingStaleError,
    NotLeaderForQueueError,
    QueueRebuiltError,
    TopicNotExistError,
)
from rocketspark.protocol.codes import RequestCode, ResponseCode
from rocketspark.protocol.command import RemotingCommand

T = TypeVar("T")
STALE = (MappingStaleError, NotLeaderForQueueError)  # the route's mapping is out of date


class QueueClient(ClientBase):
    """Base of Consumer and Admin: logical queues, their offsets, consumer-group offsets."""

    # -- queues -------------------------------------------------------------------------------

    def queues(self, topic: str) -> list[LogicalQueue]:
        """The topic's logical queues; ``queue_id`` indexes this list."""
        return self.routes.derive(topic, logical_view)  # built once per route, not per pull

    def queue(self, topic: str, queue_id: int, broker_name: str | None = None) -> LogicalQueue:
        if broker_name is not None:
            return physical_queue(self.routes.get(topic), broker_name, queue_id)
        view = self.queues(topic)
        if not 0 <= queue_id < len(view):
            raise InvalidParameterError(
                f'queue {queue_id} does not exist: topic "{topic}" has {len(view)} queues (0-{len(view) - 1})'
            )
        return view[queue_id]

    def _retrying(self, topic: str, action: Callable[[], T]) -> T:
        """Run ``action``; on a stale mapping or a moved broker, re-read the route and retry once.
        A broker that refused a read because its index disagreed with its log has rebuilt the
        index by the time it answers: retry once too."""
        try:
            return action()
        except (*STALE, ConnectError, TopicNotExistError):
            self.routes.invalidate(topic)
        except QueueRebuiltError:
            pass
        return action()

    # -- offsets ------------------------------------------------------------------------------

    def _segment_offset(self, queue: LogicalQueue, segment: Segment, code: int, **extra: object) -> int:
        ext = {"topic": queue.topic, "queueId": segment.queue_id, **extra}
        response = self.call(segment.require_address(queue.topic), RemotingCommand.request(code, ext))
        return int(response.ext["offset"])

    def min_offset(self, topic: str, queue_id: int, *, broker_name: str | None = None) -> int:
        """The earliest logical offset still stored (expired segments are skipped)."""

        def find() -> int:
            queue = self.queue(topic, queue_id, broker_name)
            for segment in queue.segments:
                low = self._segment_offset(queue, segment, RequestCode.GET_MIN_OFFSET)
                if not segment.sealed or low < segment.end_offset:
                    return segment.logical(low)
            return self.max_offset(topic, queue_id, broker_name=broker_name)

        return self._retrying(topic, find)

    def max_offset(self, topic: str, queue_id: int, *, broker_name: str | None = None) -> int:
        """One past the newest message: the logical offset the next message gets (or a later one,
        after a remap)."""

        def find() -> int:
            queue = self.queue(topic, queue_id, broker_name)
            leader = queue.leader
            if leader is not None:
                return leader.logical(self._segment_offset(queue, leader, RequestCode.GET_MAX_OFFSET))
            last = queue.segments[-1] if queue.segments else None
            return last.logical_end or 0 if last else 0

        return self._retrying(topic, find)

    def offset_for_timestamp(
        self, topic: str, queue_id: int, timestamp_ms: int, *, broker_name: str | None = None
    ) -> int:
        """The first logical offset stored at or after ``timestamp_ms`` (the max offset if none)."""

        def find() -> int:
            queue = self.queue(topic, queue_id, broker_name)
            for segment in queue.segments:
                found = self._segment_offset(
                    queue, segment, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, timestamp=timestamp_ms
                )
                if not segment.sealed or found < segment.end_offset:
                    low = self._segment_offset(queue, segment, RequestCode.GET_MIN_OFFSET)
                    return segment.logical(max(found, low))
            return self.max_offset(topic, queue_id, broker_name=broker_name)

        return self._retrying(topic, find)

    def commit_offset(
        self,
        group: str,
        topic: str,
        queue_id: int,
        offset: int,
        *,
        broker_name: str | None = None,
        reset_version: int | None = None,
    ) -> None:
        """Store the group's progress. A static topic's is logical, kept by the queue's leader.
        ``reset_version``: the last admin offset reset the committer has applied (a group
        consumer's); the broker drops a commit that predates a later reset."""

        def commit() -> None:
            queue = self.queue(topic, queue_id, broker_name)
            segment = queue.leader or queue.segments[-1]
            ext = _group_offset_ext(queue, segment, group)
            ext["commitOffset"] = offset
            if reset_version is not None:
                ext["resetVersion"] = reset_version
            request = RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, ext)
            self.call(segment.require_address(topic), request)

        self._retrying(topic, commit)

    def lock_queue(self, group: str, client_id: str, topic: str, queue_id: int) -> str:
        """Ask for the group's lock on a queue, kept where its progress is (the leader); the
        client that holds it after (``client_id`` when granted)."""

        def lock() -> str:
            queue = self.queue(topic, queue_id)
            segment = queue.leader or queue.segments[-1]
            ext = {**_group_offset_ext(queue, segment, group), "clientId": client_id}
            response = self.call(
                segment.require_address(topic), RemotingCommand.request(RequestCode.LOCK_BATCH_MQ, ext)
            )
            return str(response.ext.get("holder", ""))

        return self._retrying(topic, lock)

    def unlock_queue(self, group: str, client_id: str, topic: str, queue_id: int) -> None:
        def unlock() -> None:
            queue = self.queue(topic, queue_id)
            segment = queue.leader or queue.segments[-1]
            ext = {**_group_offset_ext(queue, segment, group), "clientId": client_id}
            self.call(segment.require_address(topic), RemotingCommand.request(RequestCode.UNLOCK_BATCH_MQ, ext))

        self._retrying(topic, unlock)

    def committed_offset(self, group: str, topic: str, queue_id: int, *, broker_name: str | None = None) -> int | None:
        """The group's committed offset, or None if it never committed one.

        For a static topic the newest segment's broker is asked first, then the brokers of
        older segments, so progress committed before a remap is still found after it.
        """

        def query() -> int | None:
            queue = self.queue(topic, queue_id, broker_name)
            seen: set[str] = set()
            for segment in reversed(queue.segments):
                if segment.broker_name in seen:
                    continue
                seen.add(segment.broker_name)
                request = RemotingCommand.request(
                    RequestCode.QUERY_CONSUMER_OFFSET, _group_offset_ext(queue, segment, group)
                )
                response = self.call(segment.require_address(topic), request, None, ResponseCode.QUERY_NOT_FOUND)
                if response.code != ResponseCode.QUERY_NOT_FOUND:
                    return int(response.ext["offset"])
            return None

        return self._retrying(topic, query)


def _group_offset_ext(queue: LogicalQueue, segment: Segment, group: str) -> dict[str, Any]:
    """Header fields of a group-offset request. A static topic's offset is logical and kept
    per logical queue (``queueId`` is the logical id then)."""
    ext = segment_request_ext(queue, segment)
    ext["consumerGroup"] = group
    if queue.static:
        ext.update(queueId=queue.queue_id, logical=True)
    return ext
