"""The broker's topic table: which topics it serves, with how many queues, persisted.

Also home of the auto-create rule (seeds 002 and 004): when ``auto_create_topic_enable`` is
on, the broker serves the template topic ``TBW102`` with ``default_topic_queue_nums``
queues and the INHERIT permission bit. A send to an unknown topic that names TBW102 as its
template creates the topic here with ``min(client's defaultTopicQueueNums, TBW102's write
queues)`` queues, which is why an auto-created topic often has fewer queues than expected
and lives only on the brokers that happened to receive its first messages.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from broker.metadata import TopicChange, TopicsFile
from broker.store.metafile import Journal, MetadataCorrupted, read_json, write_json_atomic
from rocketspark.errors import InvalidParameterError, NoPermissionError, TopicNotExistError
from rocketspark.protocol.types import Perm, TopicConfig
from rocketspark.protocol.validation import AUTO_CREATE_TOPIC

log = logging.getLogger("broker")

MAX_QUEUES = 1024


def validate_queue_nums(read: int, write: int) -> None:
    if not (1 <= write <= MAX_QUEUES and 1 <= read <= MAX_QUEUES):
        raise InvalidParameterError(f"queue counts must be between 1 and {MAX_QUEUES}; got read={read}, write={write}")


@dataclass(frozen=True, slots=True)
class BrokerTopic:
    """A topic config plus where in this broker's commit log the topic began.

    ``since_offset`` keeps recovery from indexing records of an earlier topic of the same
    name that was deleted: only records at or after it belong to this topic.
    """

    config: TopicConfig
    since_offset: int = 0

    def to_json(self) -> dict[str, Any]:
        return {**self.config.to_wire(), "since": self.since_offset}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> BrokerTopic:
        return cls(TopicConfig.from_wire(d), int(d.get("since", 0)))


class TopicTable:
    """Topics by name, in ``<data_dir>/config/topics.json``.

    A change is appended to the file's journal (one line, one fsync), so creating a topic
    costs the same with 10 topics or 10,000; the snapshot is rewritten only when the journal
    has grown as long as the table (and at least ``COMPACT_MIN_LINES``), which keeps the
    rewriting at a constant cost per change.
    """

    COMPACT_MIN_LINES = 1000

    def __init__(self, path: Path, broker_name: str, broker_perm: int = Perm.READ_WRITE) -> None:
        self.path = path
        self.broker_name = broker_name
        self.broker_perm = broker_perm  # the whole broker's (wiped for maintenance), over every topic's
        self.topics: dict[str, BrokerTopic] = {}
        self.version = 0  # rises on every change; registration carries it
        self.journal = Journal(path)

    # -- the checks every request makes -------------------------------------------------------

    def check_readable(self, topic: str, queue_id: int) -> TopicConfig:
        """The topic's config, if the topic exists here, is readable and has the queue."""
        config = self.get(topic)
        if config is None:
            raise TopicNotExistError(f'topic "{topic}" does not exist on broker {self.broker_name}')
        if not config.perm & Perm.READ or not self.broker_perm & Perm.READ:
            raise NoPermissionError(f'topic "{topic}" is not readable on broker {self.broker_name}')
        if not 0 <= queue_id < max(config.read_queue_nums, config.write_queue_nums):
            raise InvalidParameterError(
                f'queue {queue_id} does not exist: topic "{topic}" has {config.read_queue_nums} read queues on '
                f"broker {self.broker_name}"
            )
        return config

    def check_writable(self, config: TopicConfig) -> None:
        if not self.broker_perm & Perm.WRITE:
            raise NoPermissionError(
                f"broker {self.broker_name} is not accepting writes (its write permission was wiped, usually for "
                "maintenance); send to another broker of the topic"
            )
        if not config.perm & Perm.WRITE:
            raise NoPermissionError(
                f'topic "{config.name}" is not writable on broker {self.broker_name} '
                f"(perm {Perm.describe(config.perm)})"
            )

    def load(self) -> None:
        data = read_json(self.path, default={"topics": []}, shape=TopicsFile)
        self.topics = {t["name"]: BrokerTopic.from_json(t) for t in data.get("topics", [])}
        self.version = int(data.get("version", 0))
        for change in self.journal.replay(TopicChange):
            if change.put is not None:
                self.topics[change.put.name] = BrokerTopic.from_json(msgspec.to_builtins(change.put))
            if change.delete is not None:
                self.topics.pop(change.delete, None)
            self.version = max(self.version, change.version)

    def rebuild(self, queues: Iterable[tuple[str, int]], *, missing_only: bool = False) -> list[str]:
        """Recreate a lost table (or, ``missing_only``, the topics it lacks) from the consume
        queues: every topic that has one, with as many queues as its highest queue id says,
        readable and writable. Returns the topics, for the log; the operator checks queue
        counts and permissions afterwards."""
        counts: dict[str, int] = {}
        for topic, queue_id in queues:
            if not (missing_only and topic in self.topics):
                counts[topic] = max(counts.get(topic, 0), queue_id + 1)
        if not counts:
            return []
        for topic, count in sorted(counts.items()):
            n = min(count, MAX_QUEUES)
            self.topics[topic] = BrokerTopic(TopicConfig(topic, n, n, Perm.READ_WRITE), 0)
        self.version += 1
        self.compact()
        return sorted(counts)

    def rebuild_lost(self, queues: list[tuple[str, int]], commitlog: Path) -> None:
        """The table's file is missing: a store with messages would start with every message
        invisible and hand out offsets again, so rebuild the table from the consume queues on
        disk, or refuse when the log holds messages and no queue is left to rebuild from."""
        if queues:
            topics = self.rebuild(queues)
            log.warning(
                "broker %s: %s was missing; rebuilt %d topics from the consume queues on disk (%s); check their "
                "queue counts and permissions with `rocketspark admin route <topic>`",
                self.broker_name,
                self.path,
                len(topics),
                ", ".join(topics[:20]) + (" ..." if len(topics) > 20 else ""),
            )
        elif any(p.name.isdigit() for p in commitlog.glob("*")):
            raise MetadataCorrupted(
                f"{self.path} is missing but {commitlog} holds messages, and no consume queue is left to rebuild "
                "the topics from; restore topics.json from a backup (starting without it would hide every message "
                "and reuse offsets)"
            )

    def _changed(self, *, put: BrokerTopic | None = None, delete: str | None = None) -> None:
        self.version += 1
        if not self.path.exists() or self.journal.lines >= max(self.COMPACT_MIN_LINES, len(self.topics)):
            self.compact()
            return
        change: dict[str, Any] = {"version": self.version}
        if put is not None:
            change["put"] = put.to_json()
        if delete is not None:
            change["delete"] = delete
        self.journal.append(change)

    def adopt(self, entries: list[dict[str, Any]]) -> bool:
        """Take the master's table as it is (a slave); True when it changed."""
        topics = {e["name"]: BrokerTopic.from_json(e) for e in entries}
        if topics == self.topics:
            return False
        self.topics = topics
        self.version += 1
        self.compact()
        return True

    def compact(self) -> None:
        """Write the whole table as the new snapshot and drop the journal it covers."""
        write_json_atomic(self.path, {"version": self.version, "topics": [t.to_json() for t in self.topics.values()]})
        self.journal.reset()

    def close(self) -> None:
        self.journal.close()

    def get(self, name: str) -> TopicConfig | None:
        entry = self.topics.get(name)
        return entry.config if entry else None

    def accepts(self, name: str, phys: int) -> bool:
        entry = self.topics.get(name)
        return entry is not None and phys >= entry.since_offset

    def configs(self) -> list[TopicConfig]:
        return [t.config for t in self.topics.values()]

    def put(self, config: TopicConfig, since_offset: int) -> bool:
        """Create or update; return True when something changed."""
        current = self.topics.get(config.name)
        if current is not None and current.config == config:
            return False
        since = current.since_offset if current is not None else since_offset
        entry = self.topics[config.name] = BrokerTopic(config, since)
        self._changed(put=entry)
        return True

    def delete(self, name: str) -> bool:
        if self.topics.pop(name, None) is None:
            return False
        self._changed(delete=name)
        return True

    def set_auto_create(self, enabled: bool, queue_nums: int, since_offset: int) -> None:
        """Serve TBW102 (with INHERIT) exactly when auto-create is on."""
        if enabled:
            template = TopicConfig(AUTO_CREATE_TOPIC, queue_nums, queue_nums, Perm.READ_WRITE | Perm.INHERIT)
            self.put(template, since_offset)
        elif AUTO_CREATE_TOPIC in self.topics:
            self.delete(AUTO_CREATE_TOPIC)

    def auto_create(self, topic: str, template: str, client_queue_nums: int, since_offset: int) -> TopicConfig | None:
        """RocketMQ's ``createTopicInSendMessageMethod``; None when the template forbids it."""
        existing = self.get(topic)
        if existing is not None:
            return existing
        default = self.get(template)
        if default is None or not default.perm & Perm.INHERIT:
            return None
        queues = max(1, min(client_queue_nums, default.write_queue_nums))
        config = TopicConfig(topic, queues, queues, default.perm & ~Perm.INHERIT)
        self.put(config, since_offset)
        return config
