"""Static topics (RIP-21): logical queues made of physical segments, with RocketMQ 5.x's names.

A static topic has ``total_queues`` logical queues. Each logical queue is a list of
``LogicQueueMappingItem`` (RocketMQ's name): one physical queue segment each, oldest first::

    gen          generation; +1 on every remap, never reused
    queue_id     physical queue id on ``bname``; physical queues are never reused
    bname        the broker holding the segment
    logic_offset logical offset of the segment's first message (``logicOffset``)
    start_offset physical offset of that message; 0, as physical queues are never reused
    end_offset   physical end, exclusive; -1 while the segment is open (``endOffset``)

The newest item is the leader: the only writable segment (state Normal). Earlier items are
sealed (ReadOnly) until retention empties them (Expired), after which they are dropped.
Logical offsets only grow; a remap starts the new segment at the old end rounded up to the
next block of 10,000 (``blockSeqRoundUp``), leaving a deliberate gap.

Offset formulas (``LogicQueueMappingItem``)::

    physical(l) = l - logic_offset + start_offset          computePhysicalQueueOffset
    logical(p)  = logic_offset + (p - start_offset)        computeStaticQueueOffsetStrictly

``TopicQueueMappingDetail`` is what each broker stores per static topic: the epoch (a fence
that rises on every change), the total queue count, and the item lists of the logical
queues it hosts (the leader broker of a queue keeps the queue's whole history).
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any, Final

MOCK_BROKER_NAME: Final = "__syslo__global__"  # "broker" of a logical queue, as RocketMQ names it
SCOPE_GLOBAL: Final = "__global__"
BLOCK_SEQ_SIZE: Final = 10_000


class SegmentState(Enum):
    """The RIP-21 states, derived from the item and its physical queue's offsets."""

    NORMAL = "Normal"  # the leader: open, takes all writes
    READ_ONLY = "ReadOnly"  # sealed, data still readable
    EXPIRED = "Expired"  # sealed and emptied by retention: neither readable nor writable


def block_seq_round_up(offset: int, block: int = BLOCK_SEQ_SIZE) -> int:
    """RocketMQ's ``blockSeqRoundUp``: the next block boundary at least half a block away."""
    num, left = divmod(offset, block)
    return (num + 1) * block if left < block // 2 else (num + 2) * block


def new_epoch(old: int) -> int:
    """RocketMQ's rule: ``max(old + 1000, now in ms)``, so epochs rise even across admins."""
    return max(old + 1000, int(time.time() * 1000))


@dataclass(frozen=True, slots=True)
class LogicQueueMappingItem:
    gen: int
    queue_id: int
    bname: str
    logic_offset: int
    start_offset: int = 0
    end_offset: int = -1
    time_of_start: int = -1
    time_of_end: int = -1

    @property
    def sealed(self) -> bool:
        return self.end_offset >= 0

    def physical(self, logical: int) -> int:
        """``computePhysicalQueueOffset``."""
        return logical - self.logic_offset + self.start_offset

    def logical(self, physical: int) -> int:
        """``computeStaticQueueOffsetStrictly``."""
        return self.logic_offset + (physical - self.start_offset)

    @property
    def offset_delta(self) -> int:
        """Add to a physical offset to get the logical one (``computeOffsetDelta``)."""
        return self.logic_offset - self.start_offset

    @property
    def logical_end(self) -> int | None:
        """One past the last logical offset of a sealed segment; None while open."""
        return self.logical(self.end_offset) if self.sealed else None

    def seal(self, end_offset: int) -> LogicQueueMappingItem:
        return replace(self, end_offset=end_offset, time_of_end=int(time.time() * 1000))

    def to_wire(self) -> list[Any]:
        return [
            self.gen,
            self.queue_id,
            self.bname,
            self.logic_offset,
            self.start_offset,
            self.end_offset,
            self.time_of_start,
            self.time_of_end,
        ]

    @classmethod
    def from_wire(cls, v: list[Any]) -> LogicQueueMappingItem:
        return cls(int(v[0]), int(v[1]), str(v[2]), int(v[3]), int(v[4]), int(v[5]), int(v[6]), int(v[7]))


def find_item(items: list[LogicQueueMappingItem], logical: int) -> LogicQueueMappingItem:
    """RocketMQ's ``findLogicQueueMappingItem``: the last item starting at or before
    ``logical``, else the earliest item."""
    chosen = items[0]
    for item in items:
        if item.logic_offset <= logical:
            chosen = item
        else:
            break
    return chosen


def next_item(items: list[LogicQueueMappingItem], item: LogicQueueMappingItem) -> LogicQueueMappingItem | None:
    for index, candidate in enumerate(items):
        if candidate.gen == item.gen and index + 1 < len(items):
            return items[index + 1]
    return None


def check_items(logical_id: int, items: list[LogicQueueMappingItem]) -> None:
    """``checkLogicQueueMappingItemOffset``: gens strictly rise, logical offsets rise, only the
    leader is open."""
    if not items:
        raise ValueError(f"logical queue {logical_id} has no segments")
    for before, after in itertools.pairwise(items):
        if after.gen <= before.gen:
            raise ValueError(f"logical queue {logical_id}: gen {after.gen} does not follow {before.gen}")
        if after.logic_offset < (before.logical_end or before.logic_offset):
            raise ValueError(f"logical queue {logical_id}: segment gen {after.gen} starts inside gen {before.gen}")
        if not before.sealed:
            raise ValueError(f"logical queue {logical_id}: only the newest segment may be open")


@dataclass(frozen=True, slots=True)
class TopicQueueMappingDetail:
    """One broker's view of a static topic (RocketMQ's ``TopicQueueMappingDetail``)."""

    topic: str
    total_queues: int
    bname: str
    epoch: int
    scope: str = SCOPE_GLOBAL
    hosted_queues: dict[int, list[LogicQueueMappingItem]] = field(default_factory=dict)

    def leader_of(self, logical_id: int) -> LogicQueueMappingItem | None:
        """The open segment of ``logical_id`` if this broker holds it."""
        items = self.hosted_queues.get(logical_id)
        if items and items[-1].bname == self.bname and not items[-1].sealed:
            return items[-1]
        return None

    @property
    def curr_id_map(self) -> dict[int, int]:
        """Logical id -> physical queue id, for the queues this broker leads (``currIdMap``)."""
        out = {}
        for logical_id in self.hosted_queues:
            leader = self.leader_of(logical_id)
            if leader is not None:
                out[logical_id] = leader.queue_id
        return out

    def local_item(self, logical_id: int, gen: int) -> LogicQueueMappingItem | None:
        for item in self.hosted_queues.get(logical_id, []):
            if item.gen == gen and item.bname == self.bname:
                return item
        return None

    def physical_queue_count(self) -> int:
        ids = [i.queue_id for items in self.hosted_queues.values() for i in items if i.bname == self.bname]
        return max(ids) + 1 if ids else 0

    def to_wire(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "totalQueues": self.total_queues,
            "bname": self.bname,
            "epoch": self.epoch,
            "scope": self.scope,
            "hostedQueues": {str(k): [i.to_wire() for i in v] for k, v in sorted(self.hosted_queues.items())},
        }

    @classmethod
    def from_wire(cls, d: dict[str, Any]) -> TopicQueueMappingDetail:
        return cls(
            topic=d["topic"],
            total_queues=int(d["totalQueues"]),
            bname=d["bname"],
            epoch=int(d["epoch"]),
            scope=d.get("scope", SCOPE_GLOBAL),
            hosted_queues={
                int(k): [LogicQueueMappingItem.from_wire(i) for i in v] for k, v in d.get("hostedQueues", {}).items()
            },
        )


@dataclass(frozen=True, slots=True)
class TopicMapping:
    """The route's mapping of a static topic: every logical queue's segments, from its leader."""

    topic: str
    epoch: int
    total_queues: int
    queues: dict[int, list[LogicQueueMappingItem]]

    def items(self, logical_id: int) -> list[LogicQueueMappingItem]:
        return self.queues.get(logical_id, [])

    def to_wire(self) -> dict[str, Any]:
        return {
            "epoch": self.epoch,
            "totalQueues": self.total_queues,
            "queues": {str(k): [i.to_wire() for i in v] for k, v in sorted(self.queues.items())},
        }

    @classmethod
    def from_wire(cls, topic: str, d: dict[str, Any]) -> TopicMapping:
        return cls(
            topic,
            int(d["epoch"]),
            int(d["totalQueues"]),
            {int(k): [LogicQueueMappingItem.from_wire(i) for i in v] for k, v in d["queues"].items()},
        )


def merge_details(topic: str, details: list[TopicQueueMappingDetail]) -> TopicMapping | None:
    """Build the route mapping from every broker's detail (RocketMQ's
    ``topicRouteData2EndpointsForStaticTopic``): each logical queue takes its item list from
    the broker that leads it, highest epoch first; a queue with no leader (in the middle of a
    remap) takes the newest list any broker has, so its sealed data stays readable."""
    if not details:
        return None
    epoch = max(d.epoch for d in details)
    total = max(d.total_queues for d in details if d.epoch == epoch)
    queues: dict[int, list[LogicQueueMappingItem]] = {}
    rank: dict[int, tuple[int, int]] = {}
    for detail in details:
        for logical_id, items in detail.hosted_queues.items():
            if logical_id >= total or not items:
                continue
            candidate = (1 if detail.leader_of(logical_id) else 0, detail.epoch)
            if candidate > rank.get(logical_id, (-1, -1)):
                queues[logical_id] = items
                rank[logical_id] = candidate
    return TopicMapping(topic, epoch, total, queues)
