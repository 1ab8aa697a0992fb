"""What a 4.x subscription lets through, message by message.

A TAG subscription is filtered where the messages are read (the tag summary skips whole
batches; ``Columns.select`` the rest), so it needs nothing here. An SQL92 one is compiled once
per distinct expression and evaluated on each message's properties and tag, as RocketMQ's
broker evaluates ``MessageSelector.bySql``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from broker.rocketmq4.members import SQL92, Subscription
from broker.rocketmq4.messages import properties_of
from rocketspark.errors import InvalidParameterError
from rocketspark.protocol.types import MessageExt

MAX_CACHED = 1024


class Selector(Protocol):
    def matches(self, properties: dict[str, str], tag: str | None) -> bool: ...


class Filters:
    def __init__(self, compile_sql: Callable[[str], Selector]) -> None:
        self.compile_sql = compile_sql
        self._compiled: dict[str, Selector] = {}

    def selector(self, expression: str) -> Selector:
        """The compiled expression (an error naming the position of a bad one)."""
        selector = self._compiled.get(expression)
        if selector is None:
            selector = self.compile_sql(expression)
            if len(self._compiled) >= MAX_CACHED:
                self._compiled.clear()
            self._compiled[expression] = selector
        return selector

    def matcher(self, subscription: Subscription) -> Callable[[MessageExt], bool] | None:
        """None for a subscription filtered where messages are read (tags, or everything)."""
        if subscription.expression_type != SQL92:
            return None
        selector = self.selector(subscription.expression)
        return lambda message: selector.matches(properties_of(message), message.tags)


def compile_sql(expression: str) -> Selector:
    raise InvalidParameterError(f"SQL92 filters are not available on this broker yet (expression {expression!r})")
