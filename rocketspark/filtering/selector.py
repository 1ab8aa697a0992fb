"""A compiled SQL92 filter: a tree of conditions over message properties, evaluated as
RocketMQ's broker does, for one message or for many at once.

Every condition has four outcomes, kept as small integers: TRUE, FALSE, UNKNOWN (SQL's NULL:
a missing property) and ERROR (where RocketMQ's Java throws, such as ``"7.5"`` against the
Integer literal 5). A message matches only when the whole expression is TRUE: RocketMQ's
``ExpressionMessageFilter`` treats null, a non-Boolean and a thrown exception alike, as no
match. AND and OR go left to right as Java's ``LogicExpression`` does: the first FALSE (for
AND) or TRUE (for OR) decides, unless an ERROR came first; UNKNOWN otherwise wins over the
neutral outcome. Those rules are two 4x4 tables, used by both evaluations, so the vectorised
one computes exactly what the per-message one does.

The leaves (:class:`Atom`) each read a few properties. Over many messages, each property is
dictionary-encoded (its distinct values, and per message an index into them), a leaf is
evaluated once per distinct value (or combination of values), and the results are spread to
the messages with numpy; the tree above the leaves is numpy throughout.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Protocol, TypeAlias

import numpy as np
import numpy.typing as npt

from rocketspark.codec.columns import Columns
from rocketspark.filtering.comparison import (
    DOUBLE,
    STRING,
    Incomparable,
    compare,
    compare_doubles,
    parse_number,
)
from rocketspark.filtering.messages import property_columns
from rocketspark.protocol.properties import KEYS, TAGS

UNKNOWN, TRUE, FALSE, ERROR = 0, 1, 2, 3
PROPERTY, NULL = "property", "null"  # operand kinds besides the Java types of literals


class Env(Protocol):
    """Where a condition reads a property's value (None: the message lacks it)."""

    def get(self, name: str, /) -> str | None: ...


Codes: TypeAlias = npt.NDArray[np.int8]
# [outcome so far, next operand's outcome] -> outcome; rows and columns UNKNOWN, TRUE, FALSE, ERROR
_AND: Final = np.array([[0, 0, 2, 3], [0, 1, 2, 3], [2, 2, 2, 2], [3, 3, 3, 3]], dtype=np.int8)
_OR: Final = np.array([[0, 1, 0, 3], [1, 1, 1, 1], [0, 1, 2, 3], [3, 3, 3, 3]], dtype=np.int8)
_CONNECTIVES: Final = {"AND": (_AND, (FALSE, ERROR)), "OR": (_OR, (TRUE, ERROR))}  # the table, what it keeps
_NOT: Final = np.array([UNKNOWN, FALSE, TRUE, ERROR], dtype=np.int8)
_ORDER: Final[dict[str, Callable[[int], bool]]] = {
    ">": lambda c: c > 0,
    ">=": lambda c: c >= 0,
    "<": lambda c: c < 0,
    "<=": lambda c: c <= 0,
}


@dataclass(frozen=True, slots=True)
class Operand:
    """A value: a literal (``kind`` its Java type), a property (a String, or null when the
    message lacks it), or NULL (a value RocketMQ always evaluates to null, such as ``-a``)."""

    kind: str
    value: object = None
    name: str = ""

    def get(self, env: Env) -> tuple[str, object]:
        if self.kind == PROPERTY:
            return STRING, env.get(self.name)
        return self.kind, self.value

    @property
    def names(self) -> tuple[str, ...]:
        return (self.name,) if self.kind == PROPERTY else ()


class Condition:
    """A node of the tree: ``code`` for one message, ``codes`` for the rows of a table."""

    def code(self, env: Env) -> int:
        raise NotImplementedError

    def codes(self, table: Table) -> Codes:
        raise NotImplementedError

    def atoms(self) -> Iterator[Atom]:
        raise NotImplementedError


class Atom(Condition):
    """A leaf: it reads the properties ``names`` and nothing else."""

    @property
    def names(self) -> tuple[str, ...]:
        return ()

    def codes(self, table: Table) -> Codes:
        return table.atom(self)

    def atoms(self) -> Iterator[Atom]:
        yield self


@dataclass(frozen=True, slots=True)
class Constant(Atom):
    """TRUE, FALSE or NULL written as a condition."""

    outcome: int

    def code(self, env: Env) -> int:
        return self.outcome


@dataclass(frozen=True, slots=True)
class Equal(Atom):
    """``=`` (RocketMQ's ``doCreateEqual``; ``<>`` is NOT of it, ``IS NULL`` is it against NULL).
    Asymmetric as in Java: a null on the left is UNKNOWN, a null on the right only FALSE."""

    left: Operand
    right: Operand

    @property
    def names(self) -> tuple[str, ...]:
        return _names(self.left, self.right)

    def code(self, env: Env) -> int:
        (lk, lv), (rk, rv) = self.left.get(env), self.right.get(env)
        if lv is None or rv is None:
            return TRUE if lv is rv else UNKNOWN if lv is None else FALSE
        try:
            return TRUE if compare(lk, lv, rk, rv) == 0 else FALSE
        except Incomparable:
            return ERROR


@dataclass(frozen=True, slots=True)
class Order(Atom):
    """``> >= < <=``: UNKNOWN with a null on either side; two Strings compare as Doubles."""

    op: str
    left: Operand
    right: Operand

    @property
    def names(self) -> tuple[str, ...]:
        return _names(self.left, self.right)

    def code(self, env: Env) -> int:
        (lk, lv), (rk, rv) = self.left.get(env), self.right.get(env)
        if lv is None or rv is None:
            return UNKNOWN
        try:
            if lk == STRING and rk == STRING:
                order = compare_doubles(float(parse_number(DOUBLE, str(lv))), float(parse_number(DOUBLE, str(rv))))
            else:
                order = compare(lk, lv, rk, rv)
        except Incomparable:
            return ERROR
        return TRUE if _ORDER[self.op](order) else FALSE


@dataclass(frozen=True, slots=True)
class InList(Atom):
    """``name [NOT] IN ('a', ...)``: UNKNOWN when the property is missing."""

    name: str
    items: frozenset[str]
    negated: bool

    @property
    def names(self) -> tuple[str, ...]:
        return (self.name,)

    def code(self, env: Env) -> int:
        value = env.get(self.name)
        if value is None:
            return UNKNOWN
        return TRUE if (value in self.items) != self.negated else FALSE


@dataclass(frozen=True, slots=True)
class Substring(Atom):
    """``[NOT] CONTAINS | STARTSWITH | ENDSWITH 'x'`` (RocketMQ 5.1.3+): FALSE, never UNKNOWN,
    for a missing or non-String value and for an empty ``'x'``, negated or not."""

    test: str  # "CONTAINS", "STARTSWITH" or "ENDSWITH"
    operand: Operand
    needle: str
    negated: bool

    @property
    def names(self) -> tuple[str, ...]:
        return self.operand.names

    def code(self, env: Env) -> int:
        kind, value = self.operand.get(env)
        if not self.needle or value is None or kind != STRING:
            return FALSE
        text = str(value)
        if self.test == "CONTAINS":
            found = self.needle in text
        elif self.test == "STARTSWITH":
            found = text.startswith(self.needle)
        else:
            found = text.endswith(self.needle)
        return TRUE if found != self.negated else FALSE


@dataclass(frozen=True, slots=True)
class IsNull(Atom):
    operand: Operand

    @property
    def names(self) -> tuple[str, ...]:
        return self.operand.names

    def code(self, env: Env) -> int:
        return TRUE if self.operand.get(env)[1] is None else FALSE


@dataclass(frozen=True, slots=True)
class Truth(Atom):
    """A property where a condition stands (``a AND b``): RocketMQ's boolean cast of a value
    that is always a String, so FALSE when present and UNKNOWN when missing."""

    name: str

    @property
    def names(self) -> tuple[str, ...]:
        return (self.name,)

    def code(self, env: Env) -> int:
        return UNKNOWN if env.get(self.name) is None else FALSE


@dataclass(frozen=True, slots=True)
class Not(Condition):
    child: Condition

    def code(self, env: Env) -> int:
        return int(_NOT[self.child.code(env)])

    def codes(self, table: Table) -> Codes:
        out: Codes = _NOT[self.child.codes(table)]
        return out

    def atoms(self) -> Iterator[Atom]:
        return self.child.atoms()


@dataclass(frozen=True, slots=True)
class Logic(Condition):
    """``connective`` (AND or OR) of ``children``, left to right: its table combines two
    outcomes, and once the outcome is one the table keeps, the rest is not looked at."""

    connective: str
    children: tuple[Condition, ...]

    def code(self, env: Env) -> int:
        table, decided = _CONNECTIVES[self.connective]
        outcome = self.children[0].code(env)
        for child in self.children[1:]:
            if outcome in decided:
                break
            outcome = int(table[outcome, child.code(env)])
        return outcome

    def codes(self, table: Table) -> Codes:
        combine = _CONNECTIVES[self.connective][0]
        out = self.children[0].codes(table)
        for child in self.children[1:]:
            out = combine[out, child.codes(table)]
        return out

    def atoms(self) -> Iterator[Atom]:
        for child in self.children:
            yield from child.atoms()


def conjunction(children: Sequence[Condition]) -> Logic:
    return Logic("AND", tuple(children))


def disjunction(children: Sequence[Condition]) -> Logic:
    return Logic("OR", tuple(children))


def _names(*operands: Operand) -> tuple[str, ...]:
    return tuple(dict.fromkeys(n for o in operands for n in o.names))


class Table:
    """Property columns of ``rows`` messages, dictionary-encoded: per property its distinct
    values and, per message, the index of its value (-1: the message lacks it)."""

    def __init__(self, columns: Mapping[str, Sequence[str | None]], rows: int) -> None:
        self.rows = rows
        self.values: dict[str, list[str | None]] = {}
        self.index: dict[str, npt.NDArray[np.int64]] = {}
        for name, column in columns.items():
            seen: dict[str, int] = {}
            at = [-1 if v is None else seen.setdefault(v, len(seen)) for v in column]
            self.values[name] = [*seen, None]  # index -1 reads the last: None
            self.index[name] = np.asarray(at, dtype=np.int64)

    def atom(self, atom: Atom) -> Codes:
        names = atom.names
        if not names:
            return np.full(self.rows, atom.code({}), dtype=np.int8)
        if len(names) == 1:
            (name,) = names
            outcomes = np.array([atom.code({name: v}) for v in self.values[name]], dtype=np.int8)
            out: Codes = outcomes[self.index[name]]
            return out
        stacked = np.stack([self.index[n] for n in names], axis=1)
        combos, inverse = np.unique(stacked, axis=0, return_inverse=True)
        outcomes = np.array(
            [atom.code({n: self.values[n][i] for n, i in zip(names, combo, strict=True)}) for combo in combos.tolist()],
            dtype=np.int8,
        )
        out = outcomes[inverse.reshape(-1)]
        return out


@dataclass(frozen=True, slots=True)
class Selector:
    """A compiled SQL92 filter (``rocketspark.filtering.compile``).

    ``matches(properties, tag)`` says whether one message passes; ``mask(columns)`` says it
    for every message of decoded batch records at once, ``mask_rows`` for property columns. ``TAGS`` is the
    message's tag and ``KEYS`` its keys joined by spaces (as RocketMQ's properties hold them);
    every other name is a property, case-sensitive.
    """

    expression: str
    condition: Condition
    names: frozenset[str]

    def matches(
        self, properties: Mapping[str, str] | None, tag: str | None = None, keys: Sequence[str] | None = None
    ) -> bool:
        """Whether a message with these properties, tag and keys passes the filter."""
        return self.condition.code(_Message(properties or {}, tag, keys)) == TRUE

    def mask(self, columns: Columns) -> npt.NDArray[np.bool_]:
        """Which messages of decoded batches pass (vectorised: see the module's docstring)."""
        return self.mask_rows(property_columns(columns, self.names), len(columns))

    def mask_rows(self, columns: Mapping[str, Sequence[str | None]], rows: int) -> npt.NDArray[np.bool_]:
        """Which of ``rows`` messages pass, given each property's column (None: missing);
        properties not in ``columns`` are missing everywhere."""
        full = {name: columns.get(name) or [None] * rows for name in self.names}
        out: npt.NDArray[np.bool_] = self.condition.codes(Table(full, rows)) == TRUE
        return out


@dataclass(frozen=True, slots=True)
class _Message:
    """One message's properties as the filter reads them: TAGS is its tag and KEYS its keys
    (when it has them; else the properties of those names)."""

    properties: Mapping[str, str]
    tag: str | None
    keys: Sequence[str] | None

    def get(self, name: str, /) -> str | None:
        if name == TAGS and self.tag is not None:
            return self.tag
        if name == KEYS and self.keys:
            return " ".join(self.keys)
        return self.properties.get(name)
