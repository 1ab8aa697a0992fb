"""A filter expression outside RocketMQ's SQL92 grammar is refused when it is compiled, with
where (line, column, character offset), what was found and what was expected; sqlglot reads
more SQL than RocketMQ has, and the rest is refused too."""

from __future__ import annotations

import pytest

from rocketspark.errors import IllegalFilterExpressionError, InvalidParameterError, error_for_response, wire_details
from rocketspark.filtering import MAX_EXPRESSION_CHARS, compile
from rocketspark.protocol.codes import ResponseCode


def refused(expression: str) -> IllegalFilterExpressionError:
    with pytest.raises(IllegalFilterExpressionError) as caught:
        compile(expression)
    return caught.value


@pytest.mark.parametrize(
    ("expression", "position", "found", "says"),
    [
        ("a = 1 garbage", 6, "'garbage'", "unexpected 'garbage'"),
        ("a = ", 4, "the end of the expression", "expected a value or a condition, found the end"),
        ("a = 1 AND", 9, "the end of the expression", "expected a value or a condition"),
        ("(a = 1", 6, "the end of the expression", "expected ')'"),
        ("a = 1)", 5, "')'", "unexpected ')'"),
        ("a BETWEEN 1", 11, "the end of the expression", "expected 'AND'"),
        ("a BETWEEN 1 2", 12, "'2'", "expected 'AND', found '2'"),
        ("a IS", 4, "the end of the expression", "IS must be followed by NULL or NOT NULL"),
        ("a IS TRUE", 5, "'TRUE'", "IS must be followed by NULL or NOT NULL"),
        ("a IN ()", 6, "')'", "empty parentheses"),
        ("a IN ('x',)", 10, "')'", "expected a string after ','"),
        ("a = 'abc", 4, "'abc", "a string that is never closed"),
        ("a = 1 /* open", 6, "/* open", "a comment that is never closed"),
        ("a = 'x' 'y'", 8, "\"'y'\"", "right after a string"),
        ("a == 1", 3, "'='", "expected a value or a condition, found '='"),
        ("a != 1", 2, "!", "'!=' is written <>"),
        ("a = 1; b = 2", 5, ";", "';' is not part of RocketMQ's SQL92"),
        ("NOT", 3, "the end of the expression", "expected a value or a condition"),
    ],
)
def test_a_syntax_error_says_where_what_was_found_and_what_was_expected(
    expression: str, position: int, found: str, says: str
) -> None:
    error = refused(expression)
    assert error.details["position"] == position
    assert error.details["line"] == 1 and error.details["column"] == position + 1
    assert error.details["found"] == found
    assert says in error.message
    assert f"at line 1, column {position + 1} (character {position})" in error.message
    assert error.details["expression"] == expression


def test_the_position_counts_lines_and_columns() -> None:
    error = refused("a = 1 OR\n  b = 2 OR\n  c ! 3")
    assert (error.details["line"], error.details["column"], error.details["position"]) == (3, 5, 24)
    assert "at line 3, column 5 (character 24)" in error.message


@pytest.mark.parametrize(
    ("expression", "at", "says"),
    [
        ("a = f(1)", 4, "functions are not part of RocketMQ's SQL92"),
        ("upper(a) = 'X'", 0, "functions are not part of RocketMQ's SQL92"),
        ("a + 1 > 2", 0, "arithmetic"),
        ("a * 2 = 4", 2, "'*' is not part of RocketMQ's SQL92"),
        ("a LIKE 'x%'", 2, "unexpected 'LIKE'"),
        ("a = (SELECT 1)", 12, "expected ')', found '1'"),
        ('"a" = 1', 0, "quoted names are not part of RocketMQ's SQL92"),
        ("a.b = 1", 1, "'.' is not part of RocketMQ's SQL92"),
        ("a = ?", 4, "'?' is not part of RocketMQ's SQL92"),
        ("a = 'x' || 'y'", 8, "'|' is not part of RocketMQ's SQL92"),
        ("a::int = 1", 1, "':' is not part of RocketMQ's SQL92"),
        ("x = (1, 2)", 5, "a list of values belongs after IN"),
        ("é = 1", 0, "is not a property name"),
        ("a = 0x10", 5, "unexpected 'x10'"),
        ("a = 05", 4, "'05' is not a number RocketMQ reads"),
        ("a = 1.5L", 4, "'1.5L' is not a number RocketMQ reads"),
        ("a > 100000000000000000000000", 4, "out of the range of a Long"),
        ("a > 1e400", 4, "greater than the largest Double"),
        ("a > 'x'", 4, "> compares numbers, and this is a string"),
        ("a <= TRUE", 5, "<= compares numbers, and this is a boolean"),
        ("a BETWEEN 'a' AND 'b'", 10, "BETWEEN compares numbers, and this is a string"),
        ("a BETWEEN 10 AND 0", 0, "lower bound is above its upper bound"),
        ("a BETWEEN NULL AND 0", 0, "bounds cannot be NULL"),
        ("a NOT BETWEEN NULL AND 0", 14, "NOT BETWEEN compares numbers, and this is NULL"),
        ("a = NULL", 4, "write IS NULL"),
        ("a <> NULL", 5, "write IS NOT NULL"),
        ("TRUE = 5", 0, "a boolean literal cannot be compared with a literal of another type"),
        ("a IN (1, 2)", 6, "IN takes string literals only"),
        ("-a IN ('x')", 1, "IN needs a property on its left"),
        ("a CONTAINS x", 11, "CONTAINS takes a string literal"),
        ("a NOT NULL", 2, "NOT after a value must be followed by BETWEEN, IN, CONTAINS"),
        ("5", 0, "is a value, not a condition"),
        ("'x' OR a = 1", 0, "is a value, not a condition"),
        ("a = 1 = 2", 0, "a condition cannot be compared here"),
        ("(a > 5) = TRUE", 1, "a condition cannot be compared here"),
        ("a > 5 IS NULL", 4, "a condition cannot be compared here"),
        ("", 0, "the expression is empty"),
        ("   ", 0, "the expression is empty"),
    ],
)
def test_what_is_not_rocketmqs_sql92_is_refused_where_it_stands(expression: str, at: int, says: str) -> None:
    error = refused(expression)
    assert says in error.message
    assert error.details["position"] == at


@pytest.mark.parametrize(
    ("expression", "rewrite"),
    [
        ("NOT a = 1", "NOT (a = 1)"),
        ("NOT a > 5 AND b = 1", "NOT (a > 5)"),
        ("x = 1 OR NOT TAGS IN ('a', 'b')", "NOT (TAGS IN ('a', 'b'))"),
        ("NOT a BETWEEN 1 AND 2 AND b = 1", "NOT (a BETWEEN 1 AND 2)"),
        ("NOT a IS NULL", "NOT (a IS NULL)"),
        ("NOT (a) = 1", "NOT ((a) = 1)"),
    ],
)
def test_not_before_a_comparison_is_refused_with_the_parenthesized_form(expression: str, rewrite: str) -> None:
    # RocketMQ's NOT binds to the value alone (NOT a = 1 is (NOT a) = 1); SQL's to the comparison
    error = refused(expression)
    assert f"write {rewrite}" in error.message
    assert error.details["expected"] == rewrite
    assert error.details["position"] == expression.index("NOT")
    compile(rewrite)


def test_what_rocketmqs_grammar_has_compiles() -> None:
    for expression in (
        "a > 5 AND TAGS IN ('x', 'y')",
        "(a not in ('6', '4', '5')) or (b in ('3', '4', '5'))",
        "(a between 2 and 10) AND (b not between 6 and 9)",
        "a=3 and b contains 'xxx' and c not contains 'xxx'",
        "a <= now",  # now is a property, as in RocketMQ's ParserTest
        "a IS NOT NULL",
        "NOT NOT a",
        "a AND b",
        "(a) IN ('x')",
        "$price_2 >= 10",
        "a BETWEEN -10 AND 0",
        "a BETWEEN b AND c",
        "a > 0.0",  # RocketMQ 5.x refuses a literal equal to 0.0 (a Double.MIN_VALUE check); we accept it
        "NULL IS NULL",
        "a = 1 -- a comment to the end",
    ):
        assert compile(expression).expression == expression


def test_names_sql_reserves_are_property_names_here() -> None:
    names = "case any all if exists date time timestamp select from where order group limit value key type"
    for name in names.split():
        assert compile(f"{name} = 1 AND {name} IN ('x') AND {name} IS NOT NULL").names == {name}


def test_a_too_long_or_too_deep_expression_is_refused() -> None:
    long = " OR ".join(f"a{i} = {i}" for i in range(2000))
    assert len(long) > MAX_EXPRESSION_CHARS
    assert "longer than" in refused(long).message
    assert len(compile(" OR ".join(f"a{i} = {i}" for i in range(1000))).names) == 1000  # a long chain is fine
    assert "nests too deeply" in refused("(" * 600 + "a = 1" + ")" * 600).message


def test_the_error_is_an_invalid_parameter_with_rocketmqs_code_and_crosses_the_wire() -> None:
    error = refused("a = ")
    assert isinstance(error, InvalidParameterError)
    assert error.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED == 23
    again = error_for_response(error.code, error.message, type(error).__name__, wire_details(error))
    assert type(again) is IllegalFilterExpressionError
    assert again.details == error.details and again.message == error.message
