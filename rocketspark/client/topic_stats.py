"""A topic's offsets from its brokers' stats tables, in one request per broker.

``GET_TOPIC_STATS_INFO`` returns a broker's min/max offset and newest store time of every
physical queue of the topic. ``queue_bounds`` turns those rows into a logical queue's
earliest retained and latest logical offsets, across its segments. The admin's
``topic_status`` and the Spark source's latest offsets use both, so the rules live here once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from rocketspark.client.logical import LogicalQueue, Segment
from rocketspark.errors import ConnectError, TopicNotExistError
from rocketspark.protocol.bodies import unpack
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.static_mapping import SegmentState
from rocketspark.protocol.types import BrokerData, TopicRouteData

if TYPE_CHECKING:
    from rocketspark.client.admin_core import Caller


@dataclass(frozen=True, slots=True)
class QueueStats:
    """One physical queue as its broker reports it (physical offsets)."""

    min_offset: int
    max_offset: int  # one past the newest message
    last_store_ms: int  # 0 if the queue never stored a message


EMPTY = QueueStats(0, 0, 0)
TopicStats = dict[str, dict[int, QueueStats]]  # broker name -> physical queue id -> stats


def fetch_topic_stats(client: Caller, route: TopicRouteData) -> TopicStats:
    """Every broker's stats table for the route's topic, one request per broker. A broker
    that no longer has the topic (its segments expired and were dropped) has no rows; any
    other failure (a broker that cannot be reached) is raised, because reporting its queues
    as empty would move offsets backwards."""
    stats: TopicStats = {}
    for broker in route.brokers:
        try:
            rows = _stats_rows(client, route.topic, broker)
        except TopicNotExistError:
            rows = []
        stats[broker.broker_name] = {
            int(r["queueId"]): QueueStats(int(r["min"]), int(r["max"]), int(r.get("lastStoreMs", 0))) for r in rows
        }
    return stats


def _stats_rows(client: Caller, topic: str, broker: BrokerData) -> list[dict[str, int]]:
    """A broker group's stats table: from its master, else (it cannot be reached, or the group
    has none) from one of its live slaves, whose figures are at most a little behind."""
    failed = ConnectError(f"broker group {broker.broker_name} has no live replica to read {topic} from")
    for address in (a for a in (broker.address, *broker.replicas) if a):
        request = RemotingCommand.request(RequestCode.GET_TOPIC_STATS_INFO, {"topic": topic})
        try:
            rows: list[dict[str, int]] = unpack(client.call(address, request).body)
            return rows
        except ConnectError as exc:
            failed = exc
    raise failed


def segment_stats(segment: Segment, stats: TopicStats) -> QueueStats:
    return stats.get(segment.broker_name, {}).get(segment.queue_id, EMPTY)


def segment_state(segment: Segment, row: QueueStats) -> SegmentState:
    """Normal (open), ReadOnly (sealed, data left) or Expired (sealed, retention emptied it)."""
    if not segment.sealed:
        return SegmentState.NORMAL
    return SegmentState.EXPIRED if row.min_offset >= segment.end_offset else SegmentState.READ_ONLY


def queue_bounds(queue: LogicalQueue, stats: TopicStats) -> tuple[int, int]:
    """``(low, high)``: the earliest retained logical offset (the first segment retention has
    not emptied) and one past the newest (the open segment's max, or the last sealed end
    during a remap). A queue with nothing retained has ``low == high``."""
    if not queue.segments:
        return 0, 0
    low: int | None = None
    high = 0
    for segment in queue.segments:
        row = segment_stats(segment, stats)
        if low is None and segment_state(segment, row) is not SegmentState.EXPIRED:
            low = segment.logical(max(row.min_offset, segment.start_offset))
        high = segment.logical(segment.end_offset) if segment.sealed else segment.logical(row.max_offset)
    return (high if low is None else min(low, high)), high
