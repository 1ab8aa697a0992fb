"""What a 4.x subscription lets through, message by message.

A TAG subscription is filtered where the messages are read (the tag summary skips whole
batches; ``Columns.select`` the rest), so it needs nothing here. An SQL92 one is compiled once
per distinct expression (``rocketspark.filtering``), sent with the read so that the broker
skips batches holding no match, and evaluated here on each message's properties and tag, as
RocketMQ's broker evaluates ``MessageSelector.bySql``. A bad expression is refused
(SUBSCRIPTION_PARSE_FAILED, with its position).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from broker.rocketmq4.members import SQL92, Subscription
from broker.rocketmq4.messages import properties_of
from rocketspark.filtering import compile_cached
from rocketspark.protocol.types import MessageExt


class Selector(Protocol):
    def matches(self, properties: dict[str, str], tag: str | None) -> bool: ...


class Filters:
    def __init__(self, compile_sql: Callable[[str], Selector] = compile_cached) -> None:
        self.compile_sql = compile_sql

    def selector(self, expression: str) -> Selector:
        """The compiled expression (IllegalFilterExpressionError naming the position of a bad one)."""
        return self.compile_sql(expression)

    def matcher(self, subscription: Subscription) -> Callable[[MessageExt], bool] | None:
        """None for a subscription filtered where messages are read (tags, or everything)."""
        if subscription.expression_type != SQL92:
            return None
        selector = self.selector(subscription.expression)
        return lambda message: selector.matches(properties_of(message), message.tags)
