"""What a master hands its slaves besides the log: the broker's tables, as one snapshot."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from broker.dedupe import ProducerTable
from broker.offsets import ConsumerOffsets
from broker.static_topics import StaticTopics
from broker.store.scan import ScannedRecord
from broker.topics import TopicTable
from rocketspark.security.acl import AclTable
from rocketspark.security.store import AclStore


class BrokerMetadata:
    """Topic configs, static-topic mappings, consumer offsets, idempotent producers and the
    user table (a slave keeps its master's when it is newer: how a slave catches up on a user
    change it missed)."""

    def __init__(
        self,
        topics: TopicTable,
        static: StaticTopics,
        offsets: ConsumerOffsets,
        producers: ProducerTable,
        flushed_offset: Callable[[], int],
        acl: AclStore,
    ) -> None:
        self.topics = topics
        self.static = static
        self.offsets = offsets
        self.producers = producers
        self.flushed_offset = flushed_offset
        self.acl = acl

    def version(self) -> tuple[int, int]:
        """Changes whenever a topic config or a static-topic mapping changes: a slave copies
        those at once (offsets and producers follow every ``ha_metadata_interval_ms``)."""
        return self.topics.version, self.static.version

    def snapshot(self) -> dict[str, Any]:
        return {
            "topics": [t.to_json() for t in self.topics.topics.values()],
            "mappings": [d.to_wire() for d in self.static.details.values()],
            "offsets": self.offsets.snapshot(),
            "producers": (producers := self.producers.snapshot(self.flushed_offset()))["producers"],
            "producersLog": producers["log"],
            "acl": self.acl.table.to_wire(),
        }

    def adopt(self, snapshot: dict[str, Any]) -> None:
        self.topics.adopt(snapshot["topics"])
        self.static.adopt(snapshot["mappings"])
        self.offsets.adopt(snapshot["offsets"])
        self.producers.follow(snapshot["producers"], int(snapshot.get("producersLog", 0)))
        if "acl" in snapshot:
            self.acl.adopt(AclTable.from_wire(snapshot["acl"]))

    def take_office(self, records_after: Callable[[int], Iterator[ScannedRecord]]) -> None:
        """This replica becomes master: its producer table is its master's as of the last
        snapshot, plus every idempotent batch its copy of the log holds after that."""
        self.producers.replay_log(records_after(self.producers.saved_upto))
