"""Consumer group membership, fed by heartbeats, for client-side rebalance.

Each group consumer sends HEART_BEAT with its client id (and its topics, which the broker
does not need: the clients compute the rebalance); the broker answers HEART_BEAT and
GET_CONSUMER_LIST_BY_GROUP with the members it heard from within ``consumer_expired_ms``
(RocketMQ's ``ConsumerManager`` and its 120 s channel expiry).
"""

from __future__ import annotations

import time


class ConsumerGroups:
    def __init__(self, expired_ms: int) -> None:
        self.expired_s = expired_ms / 1000
        self.groups: dict[str, dict[str, float]] = {}  # group -> client id -> last heartbeat (monotonic)

    def heartbeat(self, group: str, client_id: str) -> None:
        self.groups.setdefault(group, {})[client_id] = time.monotonic()

    def unregister(self, group: str, client_id: str) -> None:
        self.groups.get(group, {}).pop(client_id, None)

    def members(self, group: str) -> list[str]:
        """The group's members heard from within ``consumer_expired_ms``; the others are dropped."""
        members = self.groups.get(group, {})
        cutoff = time.monotonic() - self.expired_s
        for client_id in [c for c, seen in members.items() if seen < cutoff]:
            del members[client_id]
        return sorted(members)
