"""Rebalance strategies give RocketMQ's assignment for the same sorted inputs."""

from __future__ import annotations

import pytest

from rocketspark.client.allocate import STRATEGIES, average, average_by_circle, consistent_hash, md5_hash


def share(strategy: str, queues: list[int], members: list[str]) -> dict[str, list[int]]:
    return {m: STRATEGIES[strategy](m, queues, members) for m in members}


def test_average_pages_queues_like_the_seed_describes() -> None:
    # Seed 001: queues are records, consumers are pages; the average size is the page size.
    assert share("average", list(range(8)), ["c1", "c2", "c3"]) == {
        "c1": [0, 1, 2],
        "c2": [3, 4, 5],
        "c3": [6, 7],
    }
    assert share("average", list(range(10)), ["a", "b", "c", "d"]) == {
        "a": [0, 1, 2],
        "b": [3, 4, 5],
        "c": [6, 7],
        "d": [8, 9],
    }
    assert share("average", list(range(4)), ["a", "b"]) == {"a": [0, 1], "b": [2, 3]}


def test_average_with_more_members_than_queues_leaves_some_idle() -> None:
    assert share("average", [0, 1], ["a", "b", "c"]) == {"a": [0], "b": [1], "c": []}


def test_average_by_circle_deals_queues_like_cards() -> None:
    assert share("average_by_circle", list(range(8)), ["c1", "c2", "c3"]) == {
        "c1": [0, 3, 6],
        "c2": [1, 4, 7],
        "c3": [2, 5],
    }


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
@pytest.mark.parametrize(("queues", "members"), [(8, 3), (16, 5), (3, 7), (1, 1), (0, 2), (100, 9)])
def test_every_queue_has_exactly_one_owner(strategy: str, queues: int, members: int) -> None:
    ids = [f"member-{i}" for i in range(members)]
    owned = [q for m in ids for q in STRATEGIES[strategy](m, list(range(queues)), ids)]
    assert sorted(owned) == list(range(queues))


def test_consistent_hash_uses_rocketmqs_md5_and_moves_few_queues_on_join() -> None:
    assert md5_hash("a") == int("0cc175b9", 16)  # first four bytes of md5("a"), big-endian
    queues = [f"MessageQueue [topic=t, brokerName=b, queueId={i}]" for i in range(40)]
    before = {m: consistent_hash(m, queues, ["a", "b", "c"]) for m in ["a", "b", "c"]}
    after = {m: consistent_hash(m, queues, ["a", "b", "c", "d"]) for m in ["a", "b", "c", "d"]}
    moved = sum(1 for m in ["a", "b", "c"] for q in before[m] if q not in after[m])
    assert moved == len(after["d"])  # only the new member's share moved, and only to it


def test_a_member_outside_the_group_is_an_error() -> None:
    with pytest.raises(ValueError, match="not in the group"):
        average("x", [1], ["a"])
    with pytest.raises(ValueError):
        average_by_circle("x", [1], ["a"])
