"""Consumer groups for the operator: who they are, how far behind, and offset resets that
running group consumers follow (mqadmin's consumerProgress and resetOffsetByTime).

On its own::

    from rocketspark.client.admin_core import AdminConnection
    from rocketspark.client.group_admin import Groups

    with AdminConnection("127.0.0.1:9876") as connection:
        groups = Groups(connection)
        print([(g.group, g.lag) for g in groups()])
        groups.reset_offset("etl", "orders", earliest=True)
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from rocketspark.client.admin_core import QueueCore
from rocketspark.client.logical import count
from rocketspark.client.topic_admin import Topics
from rocketspark.errors import InvalidParameterError, RocketSparkError
from rocketspark.protocol.bodies import pack, unpack
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.group_topics import LOGICAL_PREFIX, split_progress_key
from rocketspark.protocol.validation import validate_topic_name


@dataclass(frozen=True, slots=True)
class ConsumerProgress:
    queue_id: int
    broker_name: str
    broker_offset: int  # max offset of the queue
    consumer_offset: int  # the group's committed offset, -1 if none
    lag: int  # messages after the committed offset (counted in segments: a remap's gap is no backlog)


@dataclass(frozen=True, slots=True)
class GroupInfo:
    """A consumer group as ``admin groups`` shows it."""

    group: str
    topics: tuple[str, ...]  # topics it has committed progress on
    members: tuple[str, ...]  # client ids heard from lately, on any broker
    lag: int  # messages behind, over its topics (as consumer_progress counts)


class Groups:
    """The cluster's consumer groups. Called, it lists them (``groups()``)."""

    def __init__(self, core: QueueCore) -> None:
        self.core = core
        self._topics = Topics(core)

    def __call__(self) -> list[GroupInfo]:
        """Every group some broker keeps progress of or has members of, sorted by name: its
        topics, members and total lag."""
        topics, members = self.heard_of()
        out = []
        for group in sorted(set(topics) | set(members)):
            mine = sorted(topics.get(group, ()))
            lag = 0
            for topic in mine:
                try:
                    lag += sum(p.lag for p in self.progress(group, topic))
                except RocketSparkError:  # a topic deleted since: no lag to count
                    continue
            out.append(GroupInfo(group, tuple(mine), tuple(sorted(members.get(group, ()))), lag))
        return out

    def known(self) -> set[str]:
        """The groups some broker keeps progress of or has members of (without their lag)."""
        topics, members = self.heard_of()
        return set(topics) | set(members)

    def heard_of(self) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
        """Per group, the topics some broker keeps its progress on, and its members: one
        request per broker, no lag counted (what a page about one group or topic needs)."""
        topics: dict[str, set[str]] = {}
        members: dict[str, set[str]] = {}
        for address in self.core.brokers().values():
            response = self.core.call(address, RemotingCommand.request(RequestCode.GET_ALL_CONSUMER_OFFSET))
            body = unpack(response.body)
            for key in body["offsets"]:
                topic, group = split_progress_key(str(key))
                topics.setdefault(group, set()).add(topic.removeprefix(LOGICAL_PREFIX))
            for group, client_ids in body["members"].items():
                members.setdefault(group, set()).update(client_ids)
        return topics, members

    def progress(self, group: str, topic: str) -> list[ConsumerProgress]:
        """The group's committed offset and lag per (logical) queue: the max offsets come from
        one stats request per broker, the committed ones from each queue's broker. The brokers'
        ``rocketmq_consumer_lag_messages`` counts the same, for queues with a committed offset."""
        out = []
        queues = self.core.queues(topic)
        for status in self._topics.status(topic):
            committed = self.core.committed_offset(group, topic, status.queue_id)
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

    def reset_offset(
        self,
        group: str,
        topic: str,
        *,
        timestamp_ms: int | None = None,
        earliest: bool = False,
        latest: bool = False,
    ) -> dict[int, int]:
        """Move ``group``'s progress on ``topic`` (every logical queue) to ``timestamp_ms``, the
        earliest or the latest offset; return queue -> new offset. Every broker is told first, so
        that the group's running consumers, which hear of it in their next heartbeat, move there
        too, and so that a commit of theirs from before the reset is dropped from then on; then
        the offsets are committed, for queues no consumer holds now."""
        if (timestamp_ms is not None) + earliest + latest != 1:
            raise InvalidParameterError("reset-offset takes exactly one of --timestamp, --earliest and --latest")
        validate_topic_name(topic)
        offsets: dict[int, int] = {}
        for queue in self.core.queues(topic):
            q = queue.queue_id
            if earliest:
                offsets[q] = self.core.min_offset(topic, q)
            elif latest:
                offsets[q] = self.core.max_offset(topic, q)
            else:
                assert timestamp_ms is not None
                offsets[q] = self.core.offset_for_timestamp(topic, q, timestamp_ms)
        addresses = list(self.core.brokers().values())  # a member heartbeats every broker of its topics and retry topic
        version = self._next_reset_id(group, topic, addresses)
        body = pack({"version": version, "offsets": {str(q): o for q, o in offsets.items()}})
        for address in addresses:
            ext = {"consumerGroup": group, "topic": topic}
            self.core.call(address, RemotingCommand.request(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, ext, body=body))
        for q, offset in offsets.items():
            self.core.commit_offset(group, topic, q, offset)
        return offsets

    def _next_reset_id(self, group: str, topic: str, addresses: list[str]) -> int:
        """An id above every reset id the brokers at ``addresses`` know of (made there, or applied
        by a member): the time, unless an earlier admin's clock ran ahead of this one's (a lower id
        would be ignored by the group's members)."""
        known = [0]
        for address in addresses:
            request = RemotingCommand.request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": group})
            known.append(int((self.core.call(address, request).ext.get("resetIds") or {}).get(topic, 0)))
        return max(time.time_ns(), max(known) + 1)
