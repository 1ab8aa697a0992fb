"""SQL92 filters evaluate as RocketMQ's broker evaluates them (its filter module:
ComparisonExpression, LogicExpression, UnaryExpression; ExpressionMessageFilter for what
matches). Property values are strings, as on the wire. Cases marked "RocketMQ's test" are
from apache/rocketmq filter/src/test/java/org/apache/rocketmq/filter/ExpressionTest.java."""

from __future__ import annotations

import pytest

from rocketspark.filtering import compile, compile_cached
from rocketspark.filtering.selector import ERROR, FALSE, TRUE, UNKNOWN


def match(expression: str, properties: dict[str, str] | None = None, tag: str | None = None) -> bool:
    return compile(expression).matches(properties or {}, tag)


def outcome(expression: str, properties: dict[str, str] | None = None) -> int:
    return compile(expression).condition.code(properties or {})


# -- every operator ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "properties", "expected"),
    [
        ("a = 3", {"a": "3"}, True),
        ("a = 3", {"a": "4"}, False),
        ("a <> 3", {"a": "4"}, True),
        ("a <> 3", {"a": "3"}, False),
        ("a > 5", {"a": "6"}, True),
        ("a > 5", {"a": "5"}, False),
        ("a >= 5", {"a": "5"}, True),
        ("a < 5", {"a": "4"}, True),
        ("a < 5", {"a": "5"}, False),
        ("a <= 5", {"a": "5"}, True),
        ("a <= 5", {"a": "6"}, False),
        ("a = 'hello'", {"a": "hello"}, True),
        ("a <> 'hello'", {"a": "hello"}, False),
        ("a BETWEEN 2 AND 10", {"a": "2"}, True),  # RocketMQ's test: bounds included
        ("a BETWEEN 2 AND 10", {"a": "10"}, True),
        ("a BETWEEN 2 AND 10", {"a": "11"}, False),
        ("a NOT BETWEEN 2 AND 10", {"a": "1"}, True),
        ("a NOT BETWEEN 2 AND 10", {"a": "3"}, False),
        ("a BETWEEN -5 AND +5", {"a": "-5"}, True),
        ("a IN ('3', '4', '5')", {"a": "4"}, True),  # RocketMQ's test
        ("a IN ('3', '4', '5')", {"a": "8"}, False),
        ("a NOT IN ('3', '4', '5')", {"a": "8"}, True),
        ("a NOT IN ('3', '4', '5')", {"a": "3"}, False),
        ("a IN ('3', '4', '5', '6', '7', '8')", {"a": "8"}, True),
        ("a IS NULL", {"abc": "2"}, True),
        ("a IS NULL", {"a": "2"}, False),
        ("a IS NOT NULL", {"a": "2"}, True),
        ("a IS NOT NULL", {}, False),
        ("a = 3 AND b = 4", {"a": "3", "b": "4"}, True),
        ("a = 3 AND b = 4", {"a": "3", "b": "5"}, False),
        ("a = 3 OR b = 4", {"a": "9", "b": "4"}, True),
        ("a = 3 OR b = 4", {"a": "9", "b": "9"}, False),
        ("NOT (a = 3)", {"a": "4"}, True),
        ("NOT (a = 3)", {"a": "3"}, False),
        ("(a = 1 OR a = 2) AND b = 3", {"a": "2", "b": "3"}, True),
        ("a = 1 OR a = 2 AND b = 3", {"a": "1", "b": "9"}, True),  # AND binds tighter than OR
        ("a = -3", {"a": "-3"}, True),
        ("a = - -3", {"a": "3"}, True),
        ("a = +3", {"a": "3"}, True),
        ("value CONTAINS 'x'", {"value": "axb"}, True),  # RocketMQ's tests (5.1.3+)
        ("value STARTSWITH 'ax'", {"value": "axb"}, True),
        ("value ENDSWITH 'xb'", {"value": "axb"}, True),
        ("value CONTAINS 'x'", {"value": "abb"}, False),
        ("value NOT CONTAINS 'x'", {"value": "abb"}, True),
        ("value NOT STARTSWITH 'ax'", {"value": "axb"}, False),
        ("value NOT ENDSWITH 'x'", {"value": "abb"}, True),
        ("value CONTAINS '.'", {"value": "axb"}, False),
        ("'axb' CONTAINS 'x'", {}, True),
        ("TRUE", {}, True),
        ("FALSE", {}, False),
        ("NOT FALSE", {}, True),
        ("1 = 1", {}, True),
        ("1 = 1.0", {}, True),  # Integer widened to Double
        ("2147483648 = 2147483648L", {}, True),
    ],
)
def test_each_operator_gives_what_rocketmq_gives(expression: str, properties: dict[str, str], expected: bool) -> None:
    assert match(expression, properties) is expected


def test_the_tag_is_read_as_the_property_tags_and_keys_as_keys_joined_by_spaces() -> None:
    selector = compile("TAGS IN ('a', 'b') AND KEYS = 'k1 k2'")
    assert selector.matches({}, tag="a", keys=["k1", "k2"])
    assert not selector.matches({}, tag="c", keys=["k1", "k2"])
    assert not selector.matches({}, tag="a", keys=["k1"])
    assert selector.matches({"TAGS": "b", "KEYS": "k1 k2"}, tag=None)  # a 4.x message's own properties
    assert compile("TAGS IS NULL").matches({}, tag=None)


def test_rocketmqs_string_test_with_escaped_quotes() -> None:
    # RocketMQ's test: TAGS is not null and TAGS='''''tag''''' matches the tag ''tag''
    assert match("TAGS is not null and TAGS='''''tag'''''", tag="''tag''")
    assert match("a = 'it''s'", {"a": "it's"})
    assert not match("a = 'it''s'", {"a": "it''s"})
    assert match("a = 'back\\slash'", {"a": "back\\slash"})  # a backslash is a character, not an escape


def test_keywords_are_case_insensitive_and_property_names_are_not() -> None:
    assert match("a In ('x') aNd b iS nOt NuLl oR c BeTwEeN 1 AnD 2", {"a": "x", "b": "1"})
    assert match("tRuE")
    assert match("a = 5 and b contains 'x'", {"a": "5", "b": "xy"})
    assert not match("tags = 'x'", tag="x")  # the property "tags" is not TAGS
    assert match("Region = 'eu'", {"Region": "eu"})
    assert not match("region = 'eu'", {"Region": "eu"})


def test_comments_and_line_breaks_are_space() -> None:
    assert match("a = 1 /* first */ AND -- then\n b = 2", {"a": "1", "b": "2"})


def test_literals_in_every_form_rocketmq_reads() -> None:
    assert match("a = 5L", {"a": "5"})
    assert match("a = 5l", {"a": "5"})
    assert match("a = .5", {"a": "0.5"})
    assert match("a = 5.", {"a": "5"})
    assert match("a = 2E3", {"a": "2000"})
    assert match("a = 2.5e-1", {"a": "0.25"})
    assert match("a > 3.1E10", {"a": str(3.1415 * 10**10)})  # RocketMQ's test
    assert match("a > 3.14", {"a": "3.1415"})  # RocketMQ's test


# -- NULL: a missing property, three-valued logic ---------------------------------------------


def test_a_missing_property_is_unknown_and_unknown_never_matches() -> None:
    assert outcome("a = 'x'") == UNKNOWN
    assert not match("a = 'x'")
    assert not match("NOT (a = 'x')")  # NOT unknown is unknown
    assert not match("a <> 'x'")
    assert not match("a > 5") and not match("NOT (a > 5)")
    assert not match("a IN ('x')") and not match("a NOT IN ('x')")
    assert not match("a BETWEEN 1 AND 2") and not match("a NOT BETWEEN 1 AND 2")


def test_and_or_follow_three_valued_logic() -> None:
    assert match("a = 'x' OR b = 1", {"b": "1"})  # unknown OR true
    assert not match("a = 'x' OR b = 1", {"b": "2"})  # unknown OR false: unknown
    assert not match("a = 'x' AND b = 1", {"b": "1"})  # unknown AND true: unknown
    assert match("NOT (a = 'x' AND b = 1)", {"b": "2"})  # unknown AND false is false
    assert match("a is null OR a='hello'")  # RocketMQ's test
    assert match("a is null OR a='hello'", {"a": "hello"})
    assert not match("a is null OR a='hello'", {"a": "abc"})
    assert match("a is not null and a='hello'", {"a": "hello"})  # RocketMQ's test
    assert not match("a is not null and a='hello'")


def test_equality_with_a_missing_property_is_asymmetric_as_in_rocketmq() -> None:
    # doCreateEqual: a null on the left is unknown, a null on the right is false
    assert outcome("a = 'x'") == UNKNOWN
    assert outcome("'x' = a") == FALSE
    assert match("NOT ('x' = a)")
    assert not match("NOT (a = 'x')")
    assert match("a = b")  # both missing: null equals null
    assert match("a = b", {"a": "3.14", "b": "3.14"})  # RocketMQ's test
    assert not match("a <> b", {"a": "3.14", "b": "3.14"})
    assert match("a <> b", {"a": "3.14", "b": "3.141"})


def test_string_operators_are_false_not_unknown_on_a_missing_property() -> None:
    for expression in ("value CONTAINS 'x'", "value NOT CONTAINS 'x'", "value NOT STARTSWITH 'x'"):
        assert outcome(expression) == FALSE
    assert match("NOT (value CONTAINS 'x')")
    for expression in ("value CONTAINS ''", "value NOT CONTAINS ''", "value NOT ENDSWITH ''"):
        assert outcome(expression, {"value": "axb"}) == FALSE  # an empty search never matches
    assert outcome("5 CONTAINS 'x'") == FALSE and outcome("5 NOT CONTAINS 'x'") == FALSE


def test_a_property_standing_as_a_condition_is_never_true() -> None:
    # RocketMQ's boolean cast of a String value: false when present, null when missing
    assert outcome("a", {"a": "true"}) == FALSE
    assert outcome("a") == UNKNOWN
    assert match("NOT a", {"a": "true"})
    assert not match("NOT a")
    assert not match("NULL") and not match("NOT NULL")
    assert match("NULL IS NULL")


# -- numbers against strings -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "value", "expected"),
    [
        ("a > 5", "7", TRUE),
        ("a > 5", "7.5", ERROR),  # Integer.valueOf("7.5") throws: the message does not match
        ("a > 5.0", "7.5", TRUE),
        ("a > 5.0", "7", TRUE),  # Double.valueOf("7")
        ("a = 5", "05", TRUE),  # Integer.valueOf reads leading zeros
        ("a = 5", "+5", TRUE),
        ("a = 5", " 5", ERROR),  # but no spaces
        ("a = 5.0", " 5 ", TRUE),  # Double.valueOf trims
        ("a = 5.0", "5d", TRUE),
        ("a = 1.0", "0x1p0", TRUE),
        ("a > 5", "abc", ERROR),
        ("a > 5", "3000000000", ERROR),  # no Integer
        ("a > 3000000000", "3000000001", TRUE),  # a Long literal reads a Long
        ("a < -2147483648", "-2147483649", TRUE),
        ("a > 1.0", "NaN", TRUE),  # Double.compare puts NaN above everything
        ("a = 0.0", "-0.0", FALSE),  # and -0.0 below 0.0
        ("a = -0.0", "-0.0", TRUE),
        ("a = 1e0", "Infinity", FALSE),
        ("a = 5", "", ERROR),
        ("a = 5", "٥", TRUE),  # Integer.valueOf reads any Unicode digit
        ("a = 5.0", "٥", ERROR),  # Double.valueOf only ASCII ones
        ("a = TRUE", "true", TRUE),
        ("a = TRUE", "TRUE", TRUE),
        ("a = TRUE", "yes", FALSE),
        ("a = FALSE", "abc", TRUE),  # Boolean.valueOf is false for anything but "true"
        ("TRUE = a", "true", ERROR),  # RocketMQ casts the Boolean to a String and throws
        ("a = 'hello'", "hello", TRUE),
        ("a = 'hello'", "hellO", FALSE),
        ("5 = a", "5", TRUE),
        ("5 > a", "4", TRUE),
        ("a = -a", "5", FALSE),  # -a is null (RocketMQ negates numbers only; a value is a String), on the right
        ("-a = a", "5", UNKNOWN),  # and on the left
        ("-a IS NULL", "5", TRUE),
    ],
)
def test_a_string_value_is_converted_to_the_literals_type(expression: str, value: str, expected: int) -> None:
    assert outcome(expression, {"a": value}) == expected


def test_two_properties_compare_as_doubles_under_an_order() -> None:
    assert match("a > b", {"a": "20", "b": "10"})  # RocketMQ's test: numerically, not as text
    assert not match("a > b", {"a": "10", "b": "20"})
    assert match("a > b", {"a": "10", "b": "9"})
    assert outcome("a > b", {"a": "x", "b": "1"}) == ERROR


def test_an_error_anywhere_first_makes_the_message_not_match() -> None:
    # Java throws out of the whole expression, unless an earlier operand already decided it
    assert outcome("a > 5 OR TAGS = 'x'", {"a": "abc", "TAGS": "x"}) == ERROR
    assert outcome("TAGS = 'x' OR a > 5", {"a": "abc", "TAGS": "x"}) == TRUE
    assert outcome("TAGS = 'y' AND a > 5", {"a": "abc", "TAGS": "x"}) == FALSE
    assert outcome("NOT (a > 5)", {"a": "abc"}) == ERROR
    assert outcome("a BETWEEN 0 AND 100", {"a": "abc"}) == ERROR  # RocketMQ's test
    assert not match("key is not null and key between 0 and 100", {"key": "con"})  # RocketMQ's test


def test_rocketmqs_and_or_tests() -> None:
    both = "a=3 and b<>4 And c>5 AND d<=4"
    assert match(both, {"a": "3", "b": "5", "c": "6", "d": "1"})
    assert not match(both, {"a": "4", "b": "5", "c": "6", "d": "1"})
    either = "a=3 or b<>4 Or c>5 OR d<=4"
    assert match(either, {"a": "4", "b": "4", "c": "3", "d": "2"})
    assert not match(either, {"a": "4", "b": "4", "c": "3", "d": "10"})
    assert match("a=TRUE OR b=FALSE", {"a": "true", "b": "false"})
    assert not match("a=TRUE OR b=FALSE", {"a": "false", "b": "true"})


def test_compile_cached_compiles_each_expression_once_and_remembers_refusals() -> None:
    first = compile_cached("cached_a > 1")
    assert compile_cached("cached_a > 1") is first
    with pytest.raises(Exception) as one:
        compile_cached("cached_a >")
    with pytest.raises(Exception) as two:
        compile_cached("cached_a >")
    assert one.value is not two.value and one.value.details == two.value.details
