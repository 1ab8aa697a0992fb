"""From sqlglot's tree to a :class:`~rocketspark.filtering.selector.Selector`: what RocketMQ's
grammar allows, checked as its parser checks it.

sqlglot reads more SQL than RocketMQ's ``SelectorParser.jj`` has; this module decides. It
keeps property names, literals, unary ``+ -``, ``= <> > >= < <=``, ``[NOT] BETWEEN``,
``[NOT] IN`` with string literals, ``IS [NOT] NULL``, ``[NOT] CONTAINS | STARTSWITH |
ENDSWITH`` with a string literal, ``AND OR NOT`` and parentheses, and refuses the rest
(functions, arithmetic, ``IS TRUE``, lists) where it stands. The checks RocketMQ's
expression factories make when they parse are made here too, with the same outcome and a
clearer message (``ComparisonExpression.checkLessThanOperand`` and kin):

- ``> >= < <=`` and BETWEEN take numbers or properties: a string, boolean or NULL literal is
  refused (``a > 'x'``);
- ``=`` and ``<>`` refuse NULL (write ``IS NULL``), and a boolean literal on the left of
  another literal (``TRUE = 5``);
- BETWEEN refuses NULL bounds and, when both are literals, a lower bound above the upper;
- IN needs a property on its left;
- where a condition is expected, a property is read as RocketMQ's boolean cast (never TRUE:
  its value is a string), and a literal other than TRUE, FALSE, NULL is refused.

One restriction is ours: an operand of a comparison must be a value (a property or a literal,
possibly signed or parenthesized), not another condition. RocketMQ's grammar nests these
differently from SQL (``a > 5 IS NULL``), and compares conditions with surprising results.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, NoReturn

from sqlglot import exp

from rocketspark.filtering.comparison import BOOLEAN, DOUBLE, INTEGER, LONG, NUMBERS, STRING, Incomparable, compare
from rocketspark.filtering.grammar import DECIMAL, Source
from rocketspark.filtering.grammar import INTEGER as INTEGER_TEXT
from rocketspark.filtering.selector import (
    FALSE,
    NULL,
    PROPERTY,
    TRUE,
    UNKNOWN,
    Condition,
    Constant,
    Equal,
    InList,
    IsNull,
    Not,
    Operand,
    Order,
    Substring,
    Truth,
    conjunction,
    disjunction,
)

_ORDERS: Final[dict[type[exp.Expr], str]] = {exp.GT: ">", exp.GTE: ">=", exp.LT: "<", exp.LTE: "<="}
_SUBSTRINGS: Final[dict[type[exp.Expr], str]] = {
    exp.Contains: "CONTAINS",
    exp.StartsWith: "STARTSWITH",
    exp.EndsWith: "ENDSWITH",
}
_NEGATABLE: Final = (exp.In, exp.Between, exp.Is, exp.Contains, exp.StartsWith, exp.EndsWith)  # a NOT b
_CONDITIONS: Final = (exp.Connector, exp.Not, exp.Predicate, exp.Contains, exp.StartsWith, exp.EndsWith)
_LARGEST_LONG: Final = 2**63 - 1
_INT_BOUNDS: Final = (-(2**31), 2**31 - 1)


@dataclass(frozen=True, slots=True)
class Value:
    """An operand and what RocketMQ's parser knows of it: whether it is a literal as written
    (``literal``: its checks apply; ``-5`` is not one, it is a negation)."""

    operand: Operand
    literal: bool
    node: exp.Expr

    @property
    def is_null_literal(self) -> bool:
        return self.literal and self.operand.kind == NULL


class Compiler:
    def __init__(self, source: Source) -> None:
        self.source = source

    # -- conditions ------------------------------------------------------------------------

    def condition(self, node: exp.Expr) -> Condition:
        """``node`` where a condition stands (RocketMQ's ``asBooleanExpression``)."""
        node = _unwrap(node)
        if isinstance(node, (exp.And, exp.Or)):
            children = [self.condition(child) for child in _chain(node, type(node))]
            return conjunction(children) if isinstance(node, exp.And) else disjunction(children)
        if isinstance(node, exp.Not):
            if isinstance(node.this, _NEGATABLE):  # a NOT IN, a IS NOT NULL: prefix NOT before these is refused
                return self.predicate(node.this, negated=True)
            return Not(self.condition(node.this))
        if isinstance(node, (exp.Predicate, *_SUBSTRINGS)):
            return self.predicate(node, negated=False)
        if isinstance(node, exp.Column):
            return Truth(self.value(node).operand.name)
        if isinstance(node, exp.Boolean):
            return Constant(TRUE if node.this else FALSE)
        if isinstance(node, exp.Null):
            return Constant(UNKNOWN)
        if isinstance(node, (exp.Literal, exp.Neg)):
            self.refuse(node, "is a value, not a condition; compare it (a = 'x', a > 5, a IS NULL ...)")
        self.unsupported(node)

    def predicate(self, node: exp.Expr, *, negated: bool) -> Condition:
        builder = self._PREDICATES.get(type(node))
        if builder is None:
            self.unsupported(node)
        return builder(self, node, negated)

    def _equal(self, node: exp.Expr, negated: bool) -> Condition:
        left, right = self.value(node.this), self.value(node.expression)
        for side in (left, right):
            if side.is_null_literal:
                fix = "IS NOT NULL" if isinstance(node, exp.NEQ) else "IS NULL"
                self.refuse(side.node, f"NULL cannot be compared with = or <>; write {fix}")
        if left.literal and right.literal and left.operand.kind == BOOLEAN and right.operand.kind != BOOLEAN:
            self.refuse(node, "a boolean literal cannot be compared with a literal of another type")
        equal = Equal(left.operand, right.operand)
        return Not(equal) if isinstance(node, exp.NEQ) else equal

    def _order(self, node: exp.Expr, negated: bool) -> Condition:
        op = _ORDERS[type(node)]
        return self._ordered(op, self.value(node.this), self.value(node.expression))

    def _ordered(self, op: str, left: Value, right: Value, *, written: str = "") -> Order:
        """``left op right`` (``written``: the operator as the expression has it, for errors)."""
        for side in (left, right):
            if side.literal and side.operand.kind not in NUMBERS:
                what = {STRING: "a string", BOOLEAN: "a boolean", NULL: "NULL"}[side.operand.kind]
                self.refuse(
                    side.node, f"{written or op} compares numbers, and this is {what} (compare strings with = or IN)"
                )
        return Order(op, left.operand, right.operand)

    def _between(self, node: exp.Expr, negated: bool) -> Condition:
        value, low, high = self.value(node.this), self.value(node.args["low"]), self.value(node.args["high"])
        if negated:  # RocketMQ: a < low OR a > high, without the checks of the bounds below
            written = "NOT BETWEEN"
            return disjunction(
                [self._ordered("<", value, low, written=written), self._ordered(">", value, high, written=written)]
            )
        if low.literal and high.literal:
            if low.is_null_literal or high.is_null_literal:
                self.refuse(node, "BETWEEN's bounds cannot be NULL")
            try:
                above = compare(high.operand.kind, high.operand.value, low.operand.kind, low.operand.value) < 0
            except Incomparable:
                self.refuse(node, "BETWEEN's bounds cannot be compared with each other")
            if above:
                self.refuse(node, "BETWEEN's lower bound is above its upper bound; write the smaller one first")
        return conjunction(
            [self._ordered(">=", value, low, written="BETWEEN"), self._ordered("<=", value, high, written="BETWEEN")]
        )

    def _in(self, node: exp.Expr, negated: bool) -> Condition:
        left = self.value(node.this)
        if left.operand.kind != PROPERTY:
            self.refuse(node.this, "IN needs a property on its left (a IN ('x', 'y'))")
        items = node.expressions
        if not items or node.args.get("query") or node.args.get("field") or node.args.get("unnest"):
            self.refuse(node, "IN takes a list of string literals in parentheses: a IN ('x', 'y')")
        for item in items:
            if not (isinstance(item, exp.Literal) and item.is_string):
                self.refuse(item, "IN takes string literals only: a IN ('x', 'y')")
        return InList(left.operand.name, frozenset(item.this for item in items), negated)

    def _is(self, node: exp.Expr, negated: bool) -> Condition:
        if not isinstance(node.expression, exp.Null):
            self.refuse(node, "IS takes NULL or NOT NULL only")
        test = IsNull(self.value(node.this).operand)
        return Not(test) if negated else test

    def _substring(self, node: exp.Expr, negated: bool) -> Condition:
        test = _SUBSTRINGS[type(node)]
        needle = node.expression
        if not (isinstance(needle, exp.Literal) and needle.is_string):
            self.refuse(needle, f"{test} takes a string literal: a {test} 'x'")
        return Substring(test, self.value(node.this).operand, needle.this, negated)

    _PREDICATES: Final[dict[type[exp.Expr], Callable[[Compiler, exp.Expr, bool], Condition]]] = {
        exp.EQ: _equal,
        exp.NEQ: _equal,
        **dict.fromkeys(_ORDERS, _order),
        exp.Between: _between,
        exp.In: _in,
        exp.Is: _is,
        **dict.fromkeys(_SUBSTRINGS, _substring),
    }

    # -- values ----------------------------------------------------------------------------

    def value(self, node: exp.Expr) -> Value:
        """``node`` where a value stands: a property, a literal, or a signed value."""
        inner = _unwrap(node)
        if isinstance(inner, exp.Column):
            identifier = inner.args.get("this")
            if inner.table or not isinstance(identifier, exp.Identifier) or identifier.quoted:
                self.refuse(inner, "a property is named by one plain name (letters, digits, _ and $)")
            return Value(Operand(PROPERTY, name=inner.name), False, inner)
        if isinstance(inner, exp.Literal):
            return Value(self.literal(inner), True, inner)
        if isinstance(inner, exp.Boolean):
            return Value(Operand(BOOLEAN, bool(inner.this)), True, inner)
        if isinstance(inner, exp.Null):
            return Value(Operand(NULL), True, inner)
        if isinstance(inner, exp.Neg):
            negated = self.value(inner.this).operand
            if negated.kind in NUMBERS:  # RocketMQ negates numbers; anything else becomes null
                return Value(Operand(negated.kind, -negated.value), False, inner)  # type: ignore[operator]
            return Value(Operand(NULL), False, inner)
        if isinstance(inner, _CONDITIONS):
            self.refuse(
                inner,
                "a condition cannot be compared here: compare properties and literals, and combine "
                "the conditions with AND, OR and NOT",
            )
        self.unsupported(inner)

    def literal(self, node: exp.Literal) -> Operand:
        if node.is_string:
            return Operand(STRING, node.this)
        text = node.this
        if INTEGER_TEXT.fullmatch(text):
            number = int(text.rstrip("lL"))
            if number > _LARGEST_LONG:
                self.refuse(node, f"{text} is out of the range of a Long (at most {_LARGEST_LONG})")
            low, high = _INT_BOUNDS
            return Operand(INTEGER if low <= number <= high else LONG, number)
        if not DECIMAL.fullmatch(text):
            self.refuse(node, f"{text!r} is not a number RocketMQ reads")
        decimal = float(text)
        if decimal == float("inf"):
            self.refuse(node, f"{text} is greater than the largest Double")
        return Operand(DOUBLE, decimal)

    # -- errors ----------------------------------------------------------------------------

    def unsupported(self, node: exp.Expr) -> NoReturn:
        if isinstance(node, exp.Func) and not isinstance(node, (*_SUBSTRINGS,)):
            self.refuse(node, "functions are not part of RocketMQ's SQL92")
        if isinstance(node, (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod, exp.Binary)):
            self.refuse(node, "arithmetic and other operators are not part of RocketMQ's SQL92")
        if isinstance(node, exp.Tuple):
            self.refuse(node, "a list of values belongs after IN: a IN ('x', 'y')")
        self.refuse(node, "this is not part of RocketMQ's SQL92")

    def refuse(self, node: exp.Expr, problem: str) -> NoReturn:
        start, end = _span(node)
        text = self.source.text[start : end + 1] if end >= start else node.sql()
        self.source.refuse(start, f"{text!r}: {problem}", found=text)


def _unwrap(node: exp.Expr) -> exp.Expr:
    while isinstance(node, exp.Paren):
        node = node.this
    return node


def _chain(node: exp.Expr, kind: type[exp.Expr]) -> list[exp.Expr]:
    """The operands of a chain of one connector, left to right (without recursion: a filter
    may AND a thousand conditions)."""
    out: list[exp.Expr] = []
    stack = [node]
    while stack:
        current = stack.pop()
        if type(current) is kind:
            stack.extend([current.expression, current.this])
        else:
            out.append(current)
    return out


def _span(node: exp.Expr) -> tuple[int, int]:
    """Where ``node`` stands in the text: from its first to its last positioned leaf."""
    starts, ends = [], []
    for part in node.walk():
        meta = part.meta
        if "start" in meta:
            starts.append(int(meta["start"]))
            ends.append(int(meta["end"]))
    return (min(starts), max(ends)) if starts else (0, -1)


def compile_tree(tree: exp.Expr, source: Source) -> Condition:
    return Compiler(source).condition(tree)
