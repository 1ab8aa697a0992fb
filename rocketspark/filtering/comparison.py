"""Comparing two values as RocketMQ's filter does: Java's types and conversions.

A property's value is always a string; a literal is an Integer (a decimal that fits 32 bits),
a Long (one that does not), a Double, a String or a Boolean. RocketMQ's
``ComparisonExpression.__compare`` (filter module) converts before it compares:

- a number against a string parses the string as that number's type (``Integer.valueOf``,
  ``Long.valueOf``, ``Double.valueOf``): ``price > 5`` reads ``"7"`` as 7, but ``"7.5"`` is
  no Integer, and the whole message then does not match (Java throws; the broker logs it and
  filters the message out). Write ``price > 5.0`` to compare decimals;
- two numbers widen to the wider type (Integer to Long to Double);
- a string against a Boolean reads ``"true"`` (any case) as true and anything else as false;
  a Boolean against a string throws (a ClassCastException in RocketMQ), and a Boolean
  against a number is simply "less";
- ``> >= < <=`` between two strings parse both as Doubles (and throw when one is not).

Doubles compare as ``Double.compare`` does: NaN above everything and equal to itself, -0.0
below 0.0.
"""

from __future__ import annotations

import math
import re
from typing import Final

STRING, INTEGER, LONG, DOUBLE, BOOLEAN = "String", "Integer", "Long", "Double", "Boolean"
NUMBERS: Final = (INTEGER, LONG, DOUBLE)
_WIDER: Final = {INTEGER: 0, LONG: 1, DOUBLE: 2}
_BOUNDS: Final = {INTEGER: (-(2**31), 2**31 - 1), LONG: (-(2**63), 2**63 - 1)}

# Integer.parseInt: an optional sign and decimal digits (Character.digit reads any Unicode digit)
_JAVA_INT: Final = re.compile(r"[+-]?\d+")
# Double.valueOf, after trimming the characters up to U+0020 (the grammar in its Javadoc)
_JAVA_DOUBLE: Final = re.compile(
    r"[+-]?(?:NaN|Infinity|(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
    r"|0[xX](?:[0-9a-fA-F]+\.?|[0-9a-fA-F]*\.[0-9a-fA-F]+)[pP][+-]?[0-9]+)[fFdD]?)"
)
_JAVA_SPACE: Final = "".join(map(chr, range(33)))


class Incomparable(Exception):
    """Java would throw here; RocketMQ's broker then filters the message out."""


def parse_number(kind: str, text: str) -> int | float:
    """``text`` read as Java's ``Integer.valueOf``, ``Long.valueOf`` or ``Double.valueOf`` would."""
    if kind == DOUBLE:
        trimmed = text.strip(_JAVA_SPACE)
        if not _JAVA_DOUBLE.fullmatch(trimmed):
            raise Incomparable(f"{text!r} is not a Double")
        body = trimmed[:-1] if trimmed[-1] in "fFdD" else trimmed  # a decimal or hex form ends in a digit
        return float.fromhex(body) if "x" in body or "X" in body else float(body)
    if not _JAVA_INT.fullmatch(text):
        raise Incomparable(f"{text!r} is not an {kind}")
    value = int(text)
    low, high = _BOUNDS[kind]
    if not low <= value <= high:
        raise Incomparable(f"{text!r} is out of the range of an {kind}")
    return value


def java_boolean(text: str) -> bool:
    """``Boolean.valueOf``: true for "true" in any case, false for anything else."""
    return text.lower() == "true"


def compare_doubles(a: float, b: float) -> int:
    """``Double.compare``."""
    if a < b:
        return -1
    if a > b:
        return 1
    if a != a or b != b:  # NaN: equal to itself, above everything else
        return (a != a) - (b != b)
    return (math.copysign(1.0, a) > 0) - (math.copysign(1.0, b) > 0)  # equal, or 0.0 and -0.0


def compare(left_kind: str, left: object, right_kind: str, right: object) -> int:
    """``ComparisonExpression.__compare`` of two non-null values: their order after RocketMQ's
    conversions, or Incomparable where Java throws."""
    if left_kind != right_kind:
        if left_kind == BOOLEAN:
            if right_kind == STRING:
                raise Incomparable("a Boolean cannot be compared with a String")
            return -1
        if left_kind == STRING:
            if right_kind == BOOLEAN:
                left, left_kind = java_boolean(str(left)), BOOLEAN
            else:
                left, left_kind = parse_number(right_kind, str(left)), right_kind
        elif right_kind == STRING:
            right, right_kind = parse_number(left_kind, str(right)), left_kind
        elif right_kind == BOOLEAN:
            return -1
        else:
            left_kind = right_kind = max(left_kind, right_kind, key=_WIDER.__getitem__)
    return _same_kind(left_kind, left, right)


def _same_kind(kind: str, left: object, right: object) -> int:
    if kind == DOUBLE:
        return compare_doubles(float(left), float(right))  # type: ignore[arg-type]
    if kind == STRING:  # String.compareTo orders UTF-16 code units
        a, b = str(left).encode("utf-16-be"), str(right).encode("utf-16-be")
        return (a > b) - (a < b)
    return int((left > right) - (left < right))  # type: ignore[operator]
