"""Consumer group membership, fed by heartbeats, for client-side rebalance.

Each group consumer sends HEART_BEAT with its client id (and its topics, which the broker
does not need: the clients compute the rebalance); the broker answers HEART_BEAT and
GET_CONSUMER_LIST_BY_GROUP with the members it heard from within ``consumer_expired_ms``
(RocketMQ's ``ConsumerManager`` and its 120 s channel expiry).

A queue is handed from one member to the next through a lock (RocketMQ's LOCK_BATCH_MQ): a
member pulls a queue only while it holds its lock, and gives it up only after committing its
progress, so the next owner starts exactly there. A lock lasts as long as its holder is a
member: one that dies loses its locks when it drops out of the group, as its queues are
reassigned.
"""

from __future__ import annotations

import time

from rocketspark.errors import InvalidParameterError


class ConsumerGroups:
    def __init__(self, expired_ms: int) -> None:
        self.expired_s = expired_ms / 1000
        self.groups: dict[str, dict[str, float]] = {}  # group -> client id -> last heartbeat (monotonic)
        self.locks: dict[tuple[str, str, int], str] = {}  # (group, topic, queue id) -> the holding client id
        # group -> topic -> (reset id, logical queue -> offset): the latest offset reset, told to
        # the group's members in heartbeat answers (kept in memory; the offsets are committed)
        self.resets: dict[str, dict[str, tuple[int, dict[int, int]]]] = {}
        # group -> topic -> the newest reset id its members say they applied: a broker that
        # restarted (resets are in memory) learns from them what a new reset must exceed
        self.seen: dict[str, dict[str, int]] = {}

    def heartbeat(self, group: str, client_id: str, resets_seen: dict[str, int] | None = None) -> None:
        self.groups.setdefault(group, {})[client_id] = time.monotonic()
        if resets_seen:
            seen = self.seen.setdefault(group, {})
            for topic, version in resets_seen.items():
                seen[topic] = max(seen.get(topic, 0), version)

    def unregister(self, group: str, client_id: str) -> None:
        self.groups.get(group, {}).pop(client_id, None)
        for key in [k for k, holder in self.locks.items() if k[0] == group and holder == client_id]:
            del self.locks[key]

    def lock(self, group: str, topic: str, queue_id: int, client_id: str) -> str:
        """Give ``client_id`` the queue's lock if nobody living holds it; the holder after."""
        key = (group, topic, queue_id)
        holder = self.locks.get(key)
        if holder is None or holder == client_id or holder not in self.members(group):
            self.locks[key] = holder = client_id
        return holder

    def unlock(self, group: str, topic: str, queue_id: int, client_id: str) -> None:
        key = (group, topic, queue_id)
        if self.locks.get(key) == client_id:
            del self.locks[key]

    def members(self, group: str) -> list[str]:
        """The group's members heard from within ``consumer_expired_ms``; the others are dropped."""
        members = self.groups.get(group, {})
        cutoff = time.monotonic() - self.expired_s
        for client_id in [c for c, seen in members.items() if seen < cutoff]:
            del members[client_id]
        return sorted(members)

    def live_counts(self) -> dict[str, int]:
        """Members heard from lately, per group, without dropping anyone (safe from another
        thread: the metrics read it while the event loop changes the groups)."""
        cutoff = time.monotonic() - self.expired_s
        return {g: sum(1 for seen in list(m.values()) if seen >= cutoff) for g, m in list(self.groups.items())}

    def reset(self, group: str, topic: str, version: int, offsets: dict[int, int]) -> None:
        """An admin reset the group's offsets of ``topic``: its members move there. Ids only
        grow (the admin picks one above every broker's, whatever its clock says): a member
        applies a reset whose id is above the last it applied, and no other."""
        current = self.newest_reset_id(group, topic)
        if version <= current:
            raise InvalidParameterError(
                f"reset {version} of group {group} on {topic} is not newer than reset {current} made here "
                "already (another admin reset the group at the same time?): run the reset again"
            )
        self.resets.setdefault(group, {})[topic] = (version, offsets)

    def reset_version(self, group: str, topic: str) -> int:
        """The id of the last reset made here (0: none): a commit made before it is dropped."""
        return self.resets.get(group, {}).get(topic, (0, {}))[0]

    def newest_reset_id(self, group: str, topic: str) -> int:
        """The highest reset id known here, made here or applied by a member: the next must be higher."""
        return max(self.reset_version(group, topic), self.seen.get(group, {}).get(topic, 0))

    def reset_ids(self, group: str) -> dict[str, int]:
        """topic -> :meth:`newest_reset_id`, for the admin choosing a new reset's id."""
        topics = set(self.resets.get(group, {})) | set(self.seen.get(group, {}))
        return {topic: self.newest_reset_id(group, topic) for topic in sorted(topics)}

    def resets_for(self, group: str) -> dict[str, list[object]]:
        """The group's resets as a heartbeat answer carries them: topic -> [id, {queue: offset}]."""
        return {
            topic: [version, {str(q): o for q, o in offsets.items()}]
            for topic, (version, offsets) in self.resets.get(group, {}).items()
        }
