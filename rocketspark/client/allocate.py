"""Queue allocation among the members of a consumer group (RocketMQ's rebalance strategies).

Every member computes its own share from the same sorted inputs (all queues, all member ids),
so the group agrees without talking: each queue goes to exactly one member. The three
strategies give the same assignment as RocketMQ's classes for the same inputs:

- ``average`` (``AllocateMessageQueueAveragely``): queues are cut into consecutive pages,
  one page per member, the first ``len(queues) % len(members)`` members getting one more;
- ``average_by_circle`` (``AllocateMessageQueueAveragelyByCircle``): queues are dealt like
  cards, queue ``i`` to member ``i % len(members)``;
- ``consistent_hash`` (``AllocateMessageQueueConsistentHash``): members sit on a hash ring
  (``virtual_nodes`` points each, MD5), each queue goes to the first point at or after its
  own hash; a member joining or leaving moves only the queues next to it.
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")

Strategy = Callable[[str, Sequence[T], Sequence[str]], list[T]]


def _check(member: str, members: Sequence[str]) -> int:
    if member not in members:
        raise ValueError(f"member {member!r} is not in the group {list(members)}")
    return list(members).index(member)


def average(member: str, queues: Sequence[T], members: Sequence[str]) -> list[T]:
    index = _check(member, members)
    if not queues:
        return []
    n, m = len(queues), len(members)
    mod = n % m
    if n <= m:
        size = 1
    elif mod > 0 and index < mod:
        size = n // m + 1
    else:
        size = n // m
    start = index * size if mod > 0 and index < mod else index * size + mod
    return list(queues[start : start + max(0, min(size, n - start))])


def average_by_circle(member: str, queues: Sequence[T], members: Sequence[str]) -> list[T]:
    index = _check(member, members)
    return [q for i, q in enumerate(queues) if i % len(members) == index]


def md5_hash(key: str) -> int:
    """RocketMQ's ``MD5Hash``: the first four bytes of the MD5 digest, big-endian."""
    return int.from_bytes(hashlib.md5(key.encode()).digest()[:4], "big")


def consistent_hash(
    member: str, queues: Sequence[T], members: Sequence[str], *, virtual_nodes: int = 10, key: Callable[[T], str] = str
) -> list[T]:
    _check(member, members)
    ring = sorted((md5_hash(f"{m}-{i}"), m) for m in members for i in range(virtual_nodes))
    points = [h for h, _ in ring]
    out = []
    for queue in queues:
        at = bisect.bisect_left(points, md5_hash(key(queue)))
        owner = ring[at % len(ring)][1]
        if owner == member:
            out.append(queue)
    return out


STRATEGIES: dict[str, Strategy] = {  # type: ignore[type-arg]
    "average": average,
    "average_by_circle": average_by_circle,
    "consistent_hash": consistent_hash,
}
