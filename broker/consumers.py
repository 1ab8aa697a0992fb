"""Consumer group membership, fed by heartbeats, for client-side rebalance.

Each group consumer sends HEART_BEAT with its client id and topics; the broker answers
GET_CONSUMER_LIST_BY_GROUP with the members it heard from within ``consumer_expired_ms``
(RocketMQ's ``ConsumerManager`` and its 120 s channel expiry).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass
class Member:
    client_id: str
    topics: set[str] = field(default_factory=set)
    last_seen: float = 0.0


class ConsumerGroups:
    def __init__(self, expired_ms: int) -> None:
        self.expired_s = expired_ms / 1000
        self.groups: dict[str, dict[str, Member]] = {}

    def heartbeat(self, group: str, client_id: str, topics: list[str]) -> bool:
        """Record a heartbeat; True when the group's membership changed."""
        members = self.groups.setdefault(group, {})
        member = members.get(client_id)
        changed = member is None
        if member is None:
            member = members[client_id] = Member(client_id)
        member.topics = set(topics)
        member.last_seen = time.monotonic()
        return changed | bool(self.expire(group))

    def unregister(self, group: str, client_id: str) -> bool:
        members = self.groups.get(group, {})
        return members.pop(client_id, None) is not None

    def expire(self, group: str) -> list[str]:
        members = self.groups.get(group, {})
        cutoff = time.monotonic() - self.expired_s
        gone = [cid for cid, m in members.items() if m.last_seen < cutoff]
        for cid in gone:
            del members[cid]
        return gone

    def members(self, group: str) -> list[str]:
        self.expire(group)
        return sorted(self.groups.get(group, {}))

    def all_groups(self) -> list[str]:
        return sorted(g for g in self.groups if self.members(g))
