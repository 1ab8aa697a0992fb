"""Validation rules both sides apply: clients fail fast, brokers never trust a client."""

from __future__ import annotations

import re
from typing import Final

from rocketspark.errors import IllegalTopicNameError

TOPIC_NAME_MAX: Final = 127
TOPIC_NAME_PATTERN: Final = r"^[%|a-zA-Z0-9_-]+$"
_TOPIC_NAME = re.compile(TOPIC_NAME_PATTERN)


def validate_topic_name(name: str) -> None:
    """RocketMQ's rule: 1-127 characters from ``[%|a-zA-Z0-9_-]``."""
    if not isinstance(name, str) or not name:
        raise IllegalTopicNameError("topic name is empty; name the topic with letters, digits, '_' or '-'")
    if len(name) > TOPIC_NAME_MAX:
        raise IllegalTopicNameError(f'topic name "{name[:40]}..." is {len(name)} characters; the limit is 127')
    if not _TOPIC_NAME.match(name):
        raise IllegalTopicNameError(f'topic name "{name}" is illegal: use only letters, digits, "_", "-", "%" and "|"')
