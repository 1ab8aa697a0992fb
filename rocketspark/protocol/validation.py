"""Validation rules both sides apply: clients fail fast, brokers never trust a client."""

from __future__ import annotations

import re
from typing import Final

from rocketspark.errors import IllegalTopicNameError
from rocketspark.protocol.group_topics import DLQ_PREFIX, RETRY_PREFIX

TOPIC_NAME_MAX: Final = 127
TOPIC_NAME_PATTERN: Final = r"^[%|a-zA-Z0-9_-]+$"
_TOPIC_NAME = re.compile(TOPIC_NAME_PATTERN)
AUTO_CREATE_TOPIC: Final = "TBW102"  # RocketMQ's auto-create template topic
# Queues a topic created through the template gets (at most the template's), unless the
# producer asks otherwise: RocketMQ's defaultTopicQueueNums, on both sides of the send.
DEFAULT_TOPIC_QUEUE_NUMS: Final = 4
HELD_TOPIC_PREFIXES: Final = ("rmq_sys_", "RMQ_SYS_")  # where the v2 endpoint holds delay and half messages
SYSTEM_TOPIC_PREFIXES: Final = (RETRY_PREFIX, DLQ_PREFIX, *HELD_TOPIC_PREFIXES)  # topics the cluster keeps itself


def topic_kind(name: str, static: bool) -> str:
    """How ``admin topics`` and the console describe a topic: static, system or normal."""
    if static:
        return "static"
    return "system" if name.startswith(SYSTEM_TOPIC_PREFIXES) or name == AUTO_CREATE_TOPIC else "normal"


def validate_topic_name(name: str) -> None:
    """RocketMQ's rule: 1-127 characters from ``[%|a-zA-Z0-9_-]``."""
    if not isinstance(name, str) or not name:
        raise IllegalTopicNameError("topic name is empty; name the topic with letters, digits, '_' or '-'")
    if len(name) > TOPIC_NAME_MAX:
        raise IllegalTopicNameError(f'topic name "{name[:40]}..." is {len(name)} characters; the limit is 127')
    if not _TOPIC_NAME.match(name):
        raise IllegalTopicNameError(f'topic name "{name}" is illegal: use only letters, digits, "_", "-", "%" and "|"')
