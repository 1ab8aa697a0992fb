"""The declared shape of every metadata file a broker keeps under ``<data_dir>/config/``.

Each file is checked against its shape when the broker starts (``read_json(..., shape=)``),
so a file of the wrong shape stops start-up with one line naming the file and the field,
never a traceback from deep inside. Topic configs and static-topic mappings have the shapes
the wire already declares (:mod:`rocketspark.protocol.shapes`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from msgspec import Meta, Struct

from broker.store.metafile import MetadataCorrupted, read_json, write_json_atomic
from rocketspark.protocol.shapes import MappingDetail, Name, Offset, Perm, QueueCount, Topic

Count = Annotated[int, Meta(ge=0)]


class TopicEntry(Struct, frozen=True):
    name: Topic
    r: QueueCount
    w: QueueCount
    perm: Perm
    since: Offset = 0
    trace: bool = False  # absent in files written before message trace


class TopicsFile(Struct, frozen=True):
    """``topics.json``: the topic table (:mod:`broker.topics`)."""

    topics: list[TopicEntry]
    version: Count = 0


class TopicChange(Struct, frozen=True):
    """One line of ``topics.json.log``: a topic created or changed, or deleted."""

    version: Count
    put: TopicEntry | None = None
    delete: Topic | None = None


class OffsetsFile(Struct, frozen=True):
    """``consumerOffset.json``: ``{"group@topic": {"queueId": offset}}`` (:mod:`broker.offsets`)."""

    offsets: dict[Annotated[str, Meta(min_length=3)], dict[Annotated[str, Meta(pattern=r"^[0-9]+$")], Count]]


class MappingsFile(Struct, frozen=True):
    """``topicQueueMapping.json``: static-topic mappings (:mod:`broker.static_topics`)."""

    mappings: list[MappingDetail]


# [producer id, topic, queue id, epoch, next sequence, last used (epoch s), log end of its batch]
ProducerRow = Annotated[list[str | float], Meta(min_length=7, max_length=7)]


class ProducersFile(Struct, frozen=True):
    """``producers.json``: idempotent producers' sequences (:mod:`broker.dedupe`), current up
    to log offset ``log`` (the broker replays the batches after it at start)."""

    producers: list[ProducerRow]
    log: Annotated[int, Meta(ge=0)] = 0


class BrokerFile(Struct, frozen=True):
    """``broker.json``: settings changed at run time (the broker's permission)."""

    brokerPermission: Perm = 6  # noqa: N815 - the file's key


class IdentityFile(Struct, frozen=True):
    """``identity.json``: which group and replica this data directory belongs to."""

    group: Name
    replicaId: Annotated[int, Meta(ge=0, le=1023)]  # noqa: N815 - the file's key


def check_identity(data_dir: Path, group: str, replica_id: int) -> None:
    """Refuse to start on another replica's data: a data directory holds one replica's log,
    and serving it as another group's (or another replica's) would mix two histories."""
    path = data_dir / "config" / "identity.json"
    saved = read_json(path, default=None, shape=IdentityFile)
    if saved is None:
        write_json_atomic(path, {"group": group, "replicaId": replica_id})
    elif (saved["group"], saved["replicaId"]) != (group, replica_id):
        raise MetadataCorrupted(
            f"{data_dir} holds the data of replica {saved['replicaId']} of broker group {saved['group']}, but this "
            f"broker is replica {replica_id} of {group}: point data_dir at this replica's own directory"
        )


__all__ = [
    "BrokerFile",
    "IdentityFile",
    "MappingsFile",
    "Name",
    "OffsetsFile",
    "ProducersFile",
    "TopicsFile",
    "check_identity",
]
