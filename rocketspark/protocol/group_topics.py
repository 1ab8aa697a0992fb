"""A consumer group's own topics, named as RocketMQ names them: ``%RETRY%<group>`` holds the
messages its handler failed on, to be consumed again later; ``%DLQ%<group>`` (the dead-letter
queue) those that failed ``max_reconsume_times`` times. A broker creates both when the group
first heartbeats; they are the group's, so the group's Sub permission covers them.

The properties a message sent back carries (RocketMQ's names): how often it was consumed
again, its first topic and its first id; and (ours) when it is due again.
"""

from __future__ import annotations

from typing import Final

RETRY_PREFIX: Final = "%RETRY%"
DLQ_PREFIX: Final = "%DLQ%"
RECONSUME_TIME: Final = "RECONSUME_TIME"
RETRY_TOPIC: Final = "RETRY_TOPIC"  # the topic it was first sent to
ORIGIN_MESSAGE_ID: Final = "ORIGIN_MESSAGE_ID"
DUE_AT_MS: Final = "RETRY_DUE_AT_MS"  # not handed to the handler before this time
# RocketMQ's maxReconsumeTimes when a consumer does not say: attempts before the DLQ.
MAX_RECONSUME_TIMES: Final = 16
# A broker keeps a group's progress under "<topic>@<group>", a static topic's (per logical
# queue) under "%LOGICAL%<topic>@<group>".
LOGICAL_PREFIX: Final = "%LOGICAL%"


def progress_key(topic: str, group: str) -> str:
    """The key a broker keeps a group's committed offsets of a topic under."""
    return f"{topic}@{group}"


def split_progress_key(key: str) -> tuple[str, str]:
    """(topic, group) of a :func:`progress_key`: split at the first "@", since a topic name
    cannot hold one and a group name may."""
    topic, _, group = key.partition("@")
    return topic, group


def retry_topic(group: str) -> str:
    return RETRY_PREFIX + group


def dlq_topic(group: str) -> str:
    return DLQ_PREFIX + group


def group_of(topic: str) -> str | None:
    """The group a retry or dead-letter topic belongs to; None for any other topic."""
    for prefix in (RETRY_PREFIX, DLQ_PREFIX):
        if topic.startswith(prefix):
            return topic[len(prefix) :]
    return None
