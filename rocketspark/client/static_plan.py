"""Computing static-topic mappings (RocketMQ's ``TopicQueueMappingUtils``), as pure functions.

The admin reads every broker's mapping detail, plans the new mapping here, and writes each
broker its part. Rules kept from RocketMQ 5.x:

- logical queues are spread evenly over the brokers, least-loaded broker first;
- a physical queue is never reused: a new segment gets the next unused queue id on its broker;
- a moved queue's new segment starts at ``block_seq_round_up(old end)``, leaving a gap, so no
  logical offset is ever handed out twice;
- the queue count only grows;
- every change carries a new epoch, ``max(old + 1000, now)``;
- a broker stores the whole history of every logical queue it holds a segment of.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from rocketspark.protocol.static_mapping import (
    LogicQueueMappingItem,
    TopicQueueMappingDetail,
    block_seq_round_up,
    check_items,
)

Queues = dict[int, list[LogicQueueMappingItem]]


def leader_counts(queues: Queues, brokers: Iterable[str]) -> Counter[str]:
    counts: Counter[str] = Counter({b: 0 for b in brokers})
    for items in queues.values():
        if items and not items[-1].sealed:
            counts[items[-1].bname] += 1
    return counts


def next_queue_ids(details: Iterable[TopicQueueMappingDetail], queues: Queues) -> dict[str, int]:
    """The next never-used physical queue id on each broker."""
    used: dict[str, int] = {}
    for detail in details:
        used[detail.bname] = max(used.get(detail.bname, 0), detail.physical_queue_count())
    for items in queues.values():
        for item in items:
            used[item.bname] = max(used.get(item.bname, 0), item.queue_id + 1)
    return used


def least_loaded(counts: Counter[str], candidates: list[str]) -> str:
    return min(sorted(candidates), key=lambda b: counts[b])


def add_queues(queues: Queues, total: int, brokers: list[str], next_ids: dict[str, int]) -> Queues:
    """Give logical queues ``len(queues)..total-1`` a first segment each, spread evenly."""
    if not brokers:
        raise ValueError("no broker to put the new queues on")
    out = dict(queues)
    counts = leader_counts(out, brokers)
    for logical_id in range(total):
        if logical_id in out:
            continue
        broker = least_loaded(counts, brokers)
        queue_id = next_ids.get(broker, 0)
        next_ids[broker] = queue_id + 1
        out[logical_id] = [LogicQueueMappingItem(gen=0, queue_id=queue_id, bname=broker, logic_offset=0)]
        counts[broker] += 1
    return out


def move_queues(queues: Queues, moves: dict[int, str], ends: dict[int, int], next_ids: dict[str, int]) -> Queues:
    """Seal each moved queue's leader at its end and open a new segment on the target broker."""
    out = dict(queues)
    for logical_id, target in sorted(moves.items()):
        items = out[logical_id]
        leader = items[-1]
        end = ends[logical_id]
        sealed = leader if leader.sealed else leader.seal(end)
        queue_id = next_ids.get(target, 0)
        next_ids[target] = queue_id + 1
        start = block_seq_round_up(sealed.logical(sealed.end_offset))
        new = LogicQueueMappingItem(gen=leader.gen + 1, queue_id=queue_id, bname=target, logic_offset=start)
        out[logical_id] = [*items[:-1], sealed, new]
        check_items(logical_id, out[logical_id])
    return out


def details_for(
    topic: str, total: int, epoch: int, queues: Queues, brokers: Iterable[str]
) -> dict[str, TopicQueueMappingDetail]:
    """Each broker's detail: the full history of every logical queue it holds a segment of."""
    names = set(brokers) | {item.bname for items in queues.values() for item in items}
    out = {}
    for broker in sorted(names):
        hosted = {q: items for q, items in sorted(queues.items()) if any(i.bname == broker for i in items)}
        out[broker] = TopicQueueMappingDetail(
            topic=topic, total_queues=total, bname=broker, epoch=epoch, hosted_queues=hosted
        )
    return out


def spread_moves(queues: Queues, logical_ids: list[int], targets: list[str]) -> dict[int, str]:
    """Assign queues to move to the least-loaded of ``targets`` (draining a broker)."""
    counts = leader_counts(queues, targets)
    moves = {}
    for logical_id in sorted(logical_ids):
        target = least_loaded(counts, targets)
        moves[logical_id] = target
        counts[target] += 1
    return moves
