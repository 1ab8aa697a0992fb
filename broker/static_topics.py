"""The broker's static-topic mappings (RocketMQ's ``TopicQueueMappingManager``).

One ``TopicQueueMappingDetail`` per static topic this broker takes part in, persisted in
``<data_dir>/config/topicQueueMapping.json``. The broker uses it to:

- accept a send to a logical queue only if it holds that queue's open segment (the leader);
- serve a pull of a segment only as that segment is in its mapping (same gen, same physical
  queue), and never past a sealed segment's end: a client whose mapping is older than the
  broker's is told so (MAPPING_STALE / NOT_LEADER_FOR_QUEUE) instead of being given wrong data;
- seal leader segments at their current end when an admin remaps them away;
- drop expired sealed segments from the front of queues it leads.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from broker.metadata import MappingsFile
from broker.store.metafile import read_json, write_json_atomic
from rocketspark.errors import InvalidParameterError, MappingStaleError, NotLeaderForQueueError
from rocketspark.protocol.static_mapping import LogicQueueMappingItem, TopicQueueMappingDetail, check_items


class StaticTopics:
    def __init__(self, path: Path, broker_name: str) -> None:
        self.path = path
        self.broker_name = broker_name
        self.details: dict[str, TopicQueueMappingDetail] = {}
        self.version = 0

    def load(self) -> None:
        data = read_json(self.path, default={"mappings": []}, shape=MappingsFile)
        self.details = {d["topic"]: TopicQueueMappingDetail.from_wire(d) for d in data["mappings"]}

    def persist(self) -> None:
        self.version += 1  # every change is persisted: slaves copy the mappings when this moves
        write_json_atomic(self.path, {"mappings": [d.to_wire() for d in self.details.values()]})

    def adopt(self, wire: list[dict[str, Any]]) -> bool:
        """Take the master's mappings as they are (a slave); True when they changed."""
        details = {d.topic: d for d in (TopicQueueMappingDetail.from_wire(w) for w in wire)}
        if details == self.details:
            return False
        self.details = details
        self.persist()
        return True

    def get(self, topic: str) -> TopicQueueMappingDetail | None:
        return self.details.get(topic)

    def is_static(self, topic: str) -> bool:
        return topic in self.details

    # -- admin updates -----------------------------------------------------------------------

    def update(self, detail: TopicQueueMappingDetail, *, force: bool = False) -> bool:
        """Store a new detail from an admin; refuse one older than what is stored.

        With an equal epoch the segments must be unchanged (RocketMQ's
        ``makeSureLogicQueueMappingItemImmutable``) unless ``force``.
        """
        if detail.bname != self.broker_name:
            raise InvalidParameterError(
                f"mapping of {detail.topic} is for broker {detail.bname}, not {self.broker_name}"
            )
        for logical_id, items in detail.hosted_queues.items():
            try:
                check_items(logical_id, items)
            except ValueError as exc:
                raise InvalidParameterError(f"mapping of {detail.topic} is inconsistent: {exc}") from None
            if not 0 <= logical_id < detail.total_queues:
                raise InvalidParameterError(f"logical queue {logical_id} is outside 0..{detail.total_queues - 1}")
        current = self.details.get(detail.topic)
        if current is not None and not force:
            if detail.epoch < current.epoch:
                raise MappingStaleError(
                    f"mapping update of {detail.topic} carries epoch {detail.epoch}, older than this broker's "
                    f"{current.epoch}; re-read the mapping and retry"
                )
            if detail.total_queues < current.total_queues:
                raise InvalidParameterError(
                    f"the queue count of static topic {detail.topic} cannot go down "
                    f"({current.total_queues} -> {detail.total_queues})"
                )
            if detail == current:
                return False
        self.details[detail.topic] = detail
        self.persist()
        return True

    def seal(
        self, topic: str, logical_ids: Sequence[int], end_of: Callable[[int], int]
    ) -> dict[int, LogicQueueMappingItem]:
        """Close this broker's open segments of logical queues, each at ``end_of(physical
        queue id)``, and save the mapping once. Every id is checked first: on an error nothing
        is sealed. A segment sealed already is answered as it is (a remap being re-run)."""
        detail = self._detail(topic)
        hosted = dict(detail.hosted_queues)
        sealed: dict[int, LogicQueueMappingItem] = {}
        for logical_id in logical_ids:
            items = hosted.get(logical_id, [])
            last = items[-1] if items and items[-1].bname == self.broker_name else None
            if last is None:
                raise NotLeaderForQueueError(
                    f"broker {self.broker_name} does not lead logical queue {logical_id} of {topic}; nothing to seal"
                )
            if not last.sealed:
                last = last.seal(end_of(last.queue_id))
                hosted[logical_id] = [*items[:-1], last]
            sealed[logical_id] = last
        if hosted != detail.hosted_queues:
            self.details[topic] = replace(detail, hosted_queues=hosted)
            self.persist()
        return sealed

    def drop_front(self, topic: str, logical_id: int, gen: int) -> bool:
        """Forget an expired first segment; the leader's epoch rises by one."""
        detail = self.details.get(topic)
        if detail is None or detail.leader_of(logical_id) is None:
            return False
        items = detail.hosted_queues[logical_id]
        if len(items) < 2 or items[0].gen != gen:
            return False
        self.details[topic] = replace(
            detail, epoch=detail.epoch + 1, hosted_queues={**detail.hosted_queues, logical_id: items[1:]}
        )
        self.persist()
        return True

    def delete(self, topic: str) -> bool:
        if self.details.pop(topic, None) is None:
            return False
        self.persist()
        return True

    # -- request checks ------------------------------------------------------------------------

    def _detail(self, topic: str) -> TopicQueueMappingDetail:
        detail = self.details.get(topic)
        if detail is None:
            raise InvalidParameterError(f"{topic} is not a static topic on broker {self.broker_name}")
        return detail

    def leader_for_send(self, topic: str, logical_id: int, epoch: int) -> LogicQueueMappingItem:
        detail = self._detail(topic)
        if not 0 <= logical_id < detail.total_queues:
            raise InvalidParameterError(
                f"logical queue {logical_id} does not exist: static topic {topic} has {detail.total_queues} queues"
            )
        leader = detail.leader_of(logical_id)
        if leader is None:
            raise NotLeaderForQueueError(
                f"broker {self.broker_name} no longer leads logical queue {logical_id} of {topic} (request epoch "
                f"{epoch}, broker epoch {detail.epoch}); refresh the route and send again"
            )
        return leader

    def item_for_read(self, topic: str, logical_id: int, gen: int, queue_id: int, epoch: int) -> LogicQueueMappingItem:
        detail = self._detail(topic)
        item = detail.local_item(logical_id, gen)
        if item is None or item.queue_id != queue_id:
            raise MappingStaleError(
                f"broker {self.broker_name} holds no segment gen {gen} of logical queue {logical_id} of {topic} on "
                f"queue {queue_id} (request epoch {epoch}, broker epoch {detail.epoch}); refresh the route"
            )
        return item

    def stale_read(self, topic: str, logical_id: int, item: LogicQueueMappingItem, epoch: int) -> MappingStaleError:
        detail = self._detail(topic)
        return MappingStaleError(
            f"segment gen {item.gen} of logical queue {logical_id} of {topic} ended at physical offset "
            f"{item.end_offset} on broker {self.broker_name} (request epoch {epoch}, broker epoch {detail.epoch}); "
            "refresh the route to read on"
        )
