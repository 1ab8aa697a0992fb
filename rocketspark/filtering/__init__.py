"""Message filters by SQL92 expression over message properties, as RocketMQ's broker applies
them (``MessageSelector.bySql``; the v2 ``FilterExpression`` of type SQL).

::

    from rocketspark.filtering import compile

    selector = compile("region = 'eu' AND amount > 100 AND TAGS IN ('order', 'refund')")
    selector.matches({"region": "eu", "amount": "250"}, tag="order")  # True

``compile`` raises :class:`~rocketspark.errors.IllegalFilterExpressionError` (RocketMQ's
SUBSCRIPTION_PARSE_FAILED) naming where the expression goes wrong. ``compile_cached`` is
``compile`` remembered for the most recent expressions, refusals included (what a server
calls for every request that carries one). The grammar, the semantics and where they come
from: :mod:`rocketspark.filtering.grammar`, :mod:`rocketspark.filtering.compiler`,
:mod:`rocketspark.filtering.comparison`, :mod:`rocketspark.filtering.selector`; over decoded
batches: :mod:`rocketspark.filtering.messages`.
"""

from __future__ import annotations

import functools
from typing import Final

from rocketspark.errors import IllegalFilterExpressionError
from rocketspark.filtering.limits import MAX_EXPRESSION_CHARS
from rocketspark.filtering.selector import Selector

__all__ = ["MAX_EXPRESSION_CHARS", "IllegalFilterExpressionError", "Selector", "compile", "compile_cached"]

CACHED: Final = 256  # expressions compile_cached remembers


def compile(expression: str) -> Selector:
    """The selector for an SQL92 filter expression, or IllegalFilterExpressionError with the
    position (line, column, character offset), what was found and what was expected."""
    from rocketspark.filtering.compiler import compile_tree  # sqlglot loads only when a filter is compiled
    from rocketspark.filtering.grammar import Source, parse

    if len(expression) > MAX_EXPRESSION_CHARS:
        Source(expression).refuse(
            MAX_EXPRESSION_CHARS, f"the expression is longer than {MAX_EXPRESSION_CHARS} characters"
        )
    tree, source = parse(expression)
    try:
        condition = compile_tree(tree, source)
    except RecursionError:
        source.refuse(0, "the expression nests too deeply")
    names = frozenset(n for node in condition.atoms() for n in node.names)
    return Selector(expression, condition, names)


def compile_cached(expression: str) -> Selector:
    """``compile``, remembered: each distinct expression is compiled once (a refusal too)."""
    outcome = _compiled(expression)
    if isinstance(outcome, IllegalFilterExpressionError):
        raise IllegalFilterExpressionError(outcome.message, **outcome.details)
    return outcome


@functools.lru_cache(maxsize=CACHED)
def _compiled(expression: str) -> Selector | IllegalFilterExpressionError:
    try:
        return compile(expression)
    except IllegalFilterExpressionError as exc:
        return exc
