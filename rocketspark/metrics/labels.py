"""Label values as RocketMQ 5 writes them: request and response codes by name, in lower snake
case (its ``RemotingMetricsConstant`` lower-cases the field names of ``RequestCode`` and
``ResponseCode``: ``send_message``, ``pull_message``, ``success``, ``system_busy``), and a
message's type (``normal``, ``fifo``, ``delay``, ``transaction``, ``priority``) for the messages-in
series.

A code without a name keeps its number, so that nothing is lost; a request code nobody serves
is labelled ``unserved`` before it gets here (``rocketspark.remoting.server.UNSERVED``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from enum import StrEnum

from rocketspark.protocol.codes import RequestCode, ResponseCode
from rocketspark.protocol.properties import (
    DELAY_LEVEL,
    DELIVER_MS,
    PRIORITY,
    SHARDING_KEY,
    START_DELIVER_TIME,
    TIMER_DELAY_MS,
    TIMER_DELAY_SEC,
    TRANSACTION_PREPARED,
)
from rocketspark.rocketmq4.codes import NAMES as ROCKETMQ_NAMES


class MessageType(StrEnum):
    """RocketMQ 5's ``message_type`` label values (its ``TopicMessageType``, lower-cased)."""

    NORMAL = "normal"
    FIFO = "fifo"
    DELAY = "delay"
    TRANSACTION = "transaction"
    PRIORITY = "priority"  # RocketMQ 5.4 (RIP-80)


MESSAGE_TYPES = tuple(t.value for t in MessageType)

# The properties that make a message one of a kind: a transaction's half message, a delay (a
# level, or a due time), a sharding key (fifo), a priority.
DELAY_PROPERTIES = (DELAY_LEVEL, START_DELIVER_TIME, DELIVER_MS, TIMER_DELAY_SEC, TIMER_DELAY_MS)


def message_type(properties: Mapping[str, str]) -> MessageType:
    """A message's type from its properties: transaction first, then delay, then fifo, then
    priority (RocketMQ's ``TopicMessageType.parseFromMessageProperty`` order)."""
    if not properties:
        return MessageType.NORMAL
    if properties.get(TRANSACTION_PREPARED) == "true":
        return MessageType.TRANSACTION
    for name in DELAY_PROPERTIES:
        value = properties.get(name)
        if value and value != "0":
            return MessageType.DELAY
    if properties.get(SHARDING_KEY):
        return MessageType.FIFO
    if properties.get(PRIORITY):
        return MessageType.PRIORITY
    return MessageType.NORMAL


_REQUESTS = {int(code): code.name.lower() for code in RequestCode}
_ROCKETMQ_REQUESTS = {code: name.lower() for code, name in ROCKETMQ_NAMES.items()}
_RESPONSES = {int(code): code.name.lower() for code in ResponseCode}


def request_name(code: int | str) -> str:
    """A request code's label: ours by name, else RocketMQ's (a 4.x client's), else the
    number; a name (a gRPC method's, in CamelCase) in lower snake case."""
    if isinstance(code, str):
        return snake(code)
    return _REQUESTS.get(code) or _ROCKETMQ_REQUESTS.get(code) or str(code)


def response_name(code: int | str) -> str:
    """A response code's label: its name lower-cased (``success``, ``pull_not_found``), else
    the number."""
    if isinstance(code, str):
        return snake(code)
    return _RESPONSES.get(code) or str(code)


_WORD = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


@functools.cache  # a gRPC method's name, once per name rather than per request
def snake(name: str) -> str:
    """``SendMessage`` -> ``send_message``; ``BAD_REQUEST`` -> ``bad_request``."""
    return _WORD.sub("_", name).lower()
