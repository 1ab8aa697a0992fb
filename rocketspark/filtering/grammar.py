"""Reading an SQL92 filter expression: RocketMQ's grammar, tokenized and parsed by sqlglot.

sqlglot does the reading, through a dialect cut down to RocketMQ's ``SelectorParser.jj``:
its keywords are only RocketMQ's (``NOT AND OR BETWEEN IN TRUE FALSE NULL IS CONTAINS
STARTSWITH ENDSWITH``, any case), so ``order`` or ``date`` stay property names; strings are
``'...'`` with ``''`` for a quote; comments are ``--`` and ``/* */``. What sqlglot reads and
RocketMQ's grammar does not have is refused here, token by token, before parsing (``!=``,
``*``, ``;``, quoted names, dotted names, hex numbers, ``05``), and the parser's own errors
are given the place they happened. :mod:`rocketspark.filtering.compiler` then decides which
of the trees are RocketMQ's.

Two lexical steps are ours because sqlglot splits the tokens: a number's ``L`` suffix
(``10L``) and a number that starts with its point (``.5``) are joined back into one number.

One reading differs between the two grammars: RocketMQ's ``NOT`` binds tighter than a
comparison (``NOT a = 1`` is ``(NOT a) = 1`` there, which never matches), SQL's binds looser.
An expression that puts a comparison right after such a ``NOT`` is refused with the
parenthesized form to write instead, so an expression accepted here means the same in both.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Final, NoReturn

from sqlglot import exp, parser, tokens
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import ErrorLevel, ParseError, TokenError
from sqlglot.tokenizer_core import Token, TokenType

from rocketspark.errors import IllegalFilterExpressionError
from rocketspark.filtering.limits import MAX_EXPRESSION_CHARS

T = TokenType
# RocketMQ's 5.x string operators have no token type of their own in sqlglot: they borrow three
# that nothing else in this dialect produces, and the parser below gives them their meaning.
CONTAINS, STARTSWITH, ENDSWITH = T.GLOB, T.CARET_AT, T.ADJACENT
WORDS: Final = {
    "NOT": T.NOT,
    "AND": T.AND,
    "OR": T.OR,
    "BETWEEN": T.BETWEEN,
    "IN": T.IN,
    "TRUE": T.TRUE,
    "FALSE": T.FALSE,
    "NULL": T.NULL,
    "IS": T.IS,
    "CONTAINS": CONTAINS,
    "STARTSWITH": STARTSWITH,
    "ENDSWITH": ENDSWITH,
}
OPERATORS: Final = {"=": T.EQ, "<>": T.NEQ, ">": T.GT, ">=": T.GTE, "<": T.LT, "<=": T.LTE, "+": T.PLUS, "-": T.DASH}
PUNCTUATION: Final = {"(": T.L_PAREN, ")": T.R_PAREN, ",": T.COMMA}
# what each allowed token type must read (sqlglot also makes NOT of "!", and EQ of each "=" in "==")
_SPELLING: Final = {kind: text for text, kind in (WORDS | OPERATORS | PUNCTUATION).items()}
_VALUES: Final = {T.VAR, T.NUMBER, T.STRING}
_COMPARING: Final = {T.EQ, T.NEQ, T.GT, T.GTE, T.LT, T.LTE, T.IS, T.BETWEEN, T.IN, CONTAINS, STARTSWITH, ENDSWITH}
_AFTER_INFIX_NOT: Final = {T.BETWEEN, T.IN, CONTAINS, STARTSWITH, ENDSWITH}

_SHOWN: Final = 200  # characters of a longer expression an error shows, around the place
NAME: Final = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
INTEGER: Final = re.compile(r"(?:0|[1-9][0-9]*)[lL]?")
DECIMAL: Final = re.compile(r"(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+")


class RocketMQSelector(Dialect):
    """sqlglot's dialect for RocketMQ's message selectors."""

    class Tokenizer(tokens.Tokenizer):
        QUOTES: ClassVar[list[tuple[str, str] | str]] = ["'"]
        STRING_ESCAPES: ClassVar[list[str]] = ["'"]
        IDENTIFIERS: ClassVar[list[str | tuple[str, str]]] = ['"']  # read, so a quoted name is refused where it is
        NESTED_COMMENTS = False  # RocketMQ's /* */ ends at the first */
        KEYWORDS: ClassVar[dict[str, TokenType]] = {**WORDS, ">=": T.GTE, "<=": T.LTE, "<>": T.NEQ}

    class Parser(parser.Parser):
        # the literals keep where they stand, as numbers, strings and names do, for errors
        PRIMARY_PARSERS: ClassVar[dict[TokenType, Callable[..., Any]]] = {
            **parser.Parser.PRIMARY_PARSERS,
            T.NULL: lambda self, token: self.expression(exp.Null(), token),
            T.TRUE: lambda self, token: self.expression(exp.Boolean(this=True), token),
            T.FALSE: lambda self, token: self.expression(exp.Boolean(this=False), token),
        }
        # names such as case, any or if are properties here, not SQL's constructs, and a call of
        # any function is read as one (and refused)
        NO_PAREN_FUNCTION_PARSERS: ClassVar[dict[str, Callable[[Any], Any]]] = {}
        FUNCTION_PARSERS: ClassVar[dict[str, Callable[..., Any]]] = {}
        FUNCTIONS: ClassVar[dict[str, Callable[..., Any]]] = {}
        RANGE_PARSERS: ClassVar[dict[TokenType, Callable[..., Any]]] = {
            T.BETWEEN: parser.Parser.RANGE_PARSERS[T.BETWEEN],
            T.IN: parser.Parser.RANGE_PARSERS[T.IN],
            T.IS: parser.Parser.RANGE_PARSERS[T.IS],
            CONTAINS: parser.binary_range_parser(exp.Contains),
            STARTSWITH: parser.binary_range_parser(exp.StartsWith),
            ENDSWITH: parser.binary_range_parser(exp.EndsWith),
        }

        def _parse_between(self, this: exp.Expr | None) -> exp.Between:
            """RocketMQ's BETWEEN: ``low AND high``, the AND required (sqlglot's own would take
            ``a BETWEEN 1 2``, and a bound named ``symmetric`` as a keyword)."""
            low = self._parse_bitwise()
            if not self._match(T.AND):
                self.raise_error("Expecting AND")
            return self.expression(exp.Between(this=this, low=low, high=self._parse_bitwise()))


_DIALECT: Final = RocketMQSelector()


@dataclass(frozen=True, slots=True)
class Source:
    """The expression's text, for saying where something in it is."""

    text: str

    def refuse(self, start: int, problem: str, *, found: str = "", expected: str = "") -> NoReturn:
        """Raise the error for ``problem`` at character ``start`` (0-based)."""
        text = self.text
        line = text.count("\n", 0, start) + 1
        column = start - (text.rfind("\n", 0, start) + 1) + 1
        shown = text if len(text) <= _SHOWN else f"...{text[max(0, start - _SHOWN // 2) : start + _SHOWN // 2]}..."
        raise IllegalFilterExpressionError(
            f"Invalid SQL92 filter expression {shown!r}: at line {line}, column {column} (character {start}): "
            f"{problem}",
            expression=text[:MAX_EXPRESSION_CHARS],
            position=start,
            line=line,
            column=column,
            found=found,
            expected=expected,
        )

    def quote(self, token: Token) -> str:
        return "the end of the expression" if token.start >= len(self.text) else repr(self.span(token))

    def span(self, token: Token) -> str:
        return self.text[token.start : token.end + 1]


def parse(text: str) -> tuple[exp.Expr, Source]:
    """The expression's tree, or IllegalFilterExpressionError saying where and why."""
    source = Source(text)
    if not text.strip():
        source.refuse(0, "the expression is empty; write a condition such as a > 5 AND TAGS IN ('x')")
    found = _tokens(source)
    _check_sequence(source, found)
    _check_not_binding(source, found)
    try:
        trees = _parser().parse_into(exp.Condition, found, text)
    except ParseError:
        _locate_parse_error(source, found)
    except RecursionError:
        source.refuse(0, "the expression nests too deeply")
    if len(trees) != 1 or trees[0] is None:
        source.refuse(0, "the expression is not one condition")
    return trees[0], source


def _parser() -> parser.Parser:
    return _DIALECT.parser(error_level=ErrorLevel.IMMEDIATE)


def _locate_parse_error(source: Source, found: list[Token]) -> NoReturn:
    """Parse again with a token that no rule takes at the end: an error the first parse met at
    the end of the input (where sqlglot points at the last token) now points at it."""
    end = Token(T.R_BRACKET, "", 0, 0, len(source.text), len(source.text))
    try:
        _parser().parse_into(exp.Condition, [*found, end], source.text)
    except ParseError as exc:
        _refuse_parse_error(source, [*found, end], exc)
    source.refuse(0, "the expression does not parse")


def _tokens(source: Source) -> list[Token]:
    """sqlglot's tokens of the expression, each one RocketMQ's grammar has."""
    tokenizer = _DIALECT.tokenizer()
    try:
        raw = tokenizer.tokenize(source.text)
    except TokenError:
        _refuse_unfinished(source, tokenizer.tokens)
    joined = _join_numbers(source, raw)
    for token in joined:
        _check_token(source, token)
    return joined


def _join_numbers(source: Source, raw: list[Token]) -> list[Token]:
    """``.5`` and ``10L`` as one number each (sqlglot reads ``.``, ``5`` and ``10``, ``L``)."""
    out: list[Token] = []
    for token in raw:
        last = out[-1] if out else None
        if last is not None and last.end + 1 == token.start and _joins(last, token):
            out[-1] = _number(source, last.start, token.end, last)
        else:
            out.append(token)
    return out


def _joins(first: Token, second: Token) -> bool:
    if second.token_type == T.NUMBER and first.token_type == T.DOT:
        return True
    return first.token_type == T.NUMBER and second.text in ("L", "l")


def _number(source: Source, start: int, end: int, first: Token) -> Token:
    return Token(T.NUMBER, source.text[start : end + 1].rstrip("lL"), first.line, first.col, start, end)


def _check_token(source: Source, token: Token) -> None:
    kind, text = token.token_type, source.span(token)
    if kind == T.VAR:
        if not NAME.fullmatch(text):
            source.refuse(
                token.start,
                f"{text!r} is not a property name (a name is letters, digits, _ and $, not starting with a digit)",
                found=text,
                expected="a property name",
            )
    elif kind == T.NUMBER:
        if not (INTEGER.fullmatch(text) or DECIMAL.fullmatch(text)):
            source.refuse(
                token.start,
                f"{text!r} is not a number RocketMQ reads (integers such as 10 or 10L without leading zeros, "
                "decimals such as 1.5, .5 or 2E10)",
                found=text,
                expected="a number",
            )
    elif kind == T.IDENTIFIER:
        source.refuse(
            token.start,
            f"quoted names are not part of RocketMQ's SQL92: write the property name as is ({token.text})",
            found=text,
            expected="a property name",
        )
    elif kind == T.NOT and text == "!":
        source.refuse(token.start, "'!=' is written <> in RocketMQ's SQL92", found=text, expected="<>")
    elif kind != T.STRING and _SPELLING.get(kind) != text.upper():
        source.refuse(
            token.start,
            f"{text!r} is not part of RocketMQ's SQL92 (it has = <> > >= < <=, AND OR NOT, BETWEEN, IN, IS NULL, "
            "CONTAINS, STARTSWITH, ENDSWITH, unary + and -, parentheses, and no functions or arithmetic)",
            found=text,
        )


def _refuse_unfinished(source: Source, scanned: list[Token]) -> NoReturn:
    """sqlglot could not read past the last token it made: say what starts after it and is never
    closed (a string, a quoted name or a comment)."""
    at = scanned[-1].end + 1 if scanned else 0
    text = source.text
    while at < len(text):
        if text[at].isspace():
            at += 1
        elif text.startswith("--", at):
            newline = text.find("\n", at)
            at = len(text) if newline < 0 else newline + 1
        elif text.startswith("/*", at) and text.find("*/", at + 2) >= 0:
            at = text.find("*/", at + 2) + 2
        else:
            break
    if text.startswith("'", at):
        problem, closing = "a string that is never closed (a quote inside a string is written '')", "'"
    elif text.startswith("/*", at):
        problem, closing = "a comment that is never closed (/* needs its */)", "*/"
    elif text.startswith('"', at):
        problem, closing = "a quoted name that is never closed (quoted names are not part of RocketMQ's SQL92)", '"'
    else:
        problem, closing = "the expression cannot be read from here", ""
    source.refuse(at, problem, found=text[at : at + 20], expected=closing)


def _check_sequence(source: Source, found: list[Token]) -> None:
    """What sqlglot would let through between two tokens: ``('a',)``, ``()``, ``'a' 'b'``
    (joined), ``IS TRUE``."""
    for i, token in enumerate(found):
        kind = token.token_type
        following = found[i + 1] if i + 1 < len(found) else None
        after = following.token_type if following is not None else None
        here = source.quote(following) if following is not None else "the end of the expression"
        at = following.start if following is not None else len(source.text)
        if kind == T.COMMA and after in (T.COMMA, T.R_PAREN, None):
            source.refuse(at, f"expected a string after ',', found {here}", found=here, expected="a string")
        if kind == T.L_PAREN and after == T.R_PAREN:
            source.refuse(at, "empty parentheses: expected a condition or a value", found=here)
        if kind == T.STRING and after == T.STRING:
            source.refuse(at, f"unexpected {here} right after a string", found=here)
        if kind == T.IS and not (after == T.NULL or (after == T.NOT and _type(found, i + 2) == T.NULL)):
            _refuse_after_is(source, found, i + 2 if after == T.NOT else i + 1)


def _refuse_after_is(source: Source, found: list[Token], i: int) -> NoReturn:
    here = source.quote(found[i]) if i < len(found) else "the end of the expression"
    at = found[i].start if i < len(found) else len(source.text)
    source.refuse(at, f"IS must be followed by NULL or NOT NULL, found {here}", found=here, expected="NULL")


def _type(found: list[Token], i: int) -> TokenType | None:
    return found[i].token_type if i < len(found) else None


def _check_not_binding(source: Source, found: list[Token]) -> None:
    """Refuse ``NOT a = 1``: in RocketMQ, NOT takes only the value after it, and a comparison
    right after that value compares the negated value, where SQL negates the comparison."""
    for i, token in enumerate(found):
        if token.token_type != T.NOT:
            continue
        before = found[i - 1].token_type if i else None
        if before == T.IS:
            continue
        if before in _VALUES or before in (T.R_PAREN, T.TRUE, T.FALSE, T.NULL):
            if _type(found, i + 1) not in _AFTER_INFIX_NOT:
                source.refuse(
                    token.start,
                    "NOT after a value must be followed by BETWEEN, IN, CONTAINS, STARTSWITH or ENDSWITH",
                    found=source.quote(found[i + 1]) if i + 1 < len(found) else "the end of the expression",
                    expected="BETWEEN, IN, CONTAINS, STARTSWITH or ENDSWITH",
                )
            continue
        after = _after_operand(found, i + 1)
        if after < len(found) and found[after].token_type in _COMPARING | {T.NOT}:
            operand = source.text[found[i + 1].start : found[after - 1].end + 1]
            rest = source.text[found[i + 1].start : _end_of_comparison(found, after) + 1]
            source.refuse(
                token.start,
                f"in RocketMQ's SQL92, NOT applies to {operand!r} alone here, not to the comparison after it "
                f"(it would compare the negated value, which never matches); write NOT ({rest})",
                found=f"NOT {rest}",
                expected=f"NOT ({rest})",
            )


def _after_operand(found: list[Token], i: int) -> int:
    """Where the operand of a prefix operator starting at ``i`` ends (the index after it)."""
    while i < len(found) and found[i].token_type in (T.NOT, T.PLUS, T.DASH):
        i += 1
    if i < len(found) and found[i].token_type == T.L_PAREN:
        depth = 0
        while i < len(found):
            depth += {T.L_PAREN: 1, T.R_PAREN: -1}.get(found[i].token_type, 0)
            i += 1
            if depth == 0:
                break
        return i
    return i + 1


def _end_of_comparison(found: list[Token], i: int) -> int:
    """The character where the comparison starting at token ``i`` ends: at the AND or OR
    that follows it (not the AND of a BETWEEN), or a closing parenthesis it did not open."""
    depth, between, last = 0, False, found[i].end
    for token in found[i:]:
        kind = token.token_type
        if depth == 0 and kind == T.BETWEEN:
            between = True
        elif depth == 0 and kind == T.AND and between:
            between = False
        elif depth == 0 and kind in (T.AND, T.OR):
            break
        depth += {T.L_PAREN: 1, T.R_PAREN: -1}.get(kind, 0)
        if depth < 0:
            break
        last = token.end
    return last


def _refuse_parse_error(source: Source, found: list[Token], error: ParseError) -> NoReturn:
    """sqlglot's error, at the token it stood on (found: that token, or the end)."""
    detail = error.errors[0] if error.errors else {}
    line, col = detail.get("line"), detail.get("col")
    token = next((t for t in found if t.line == line and t.col == col), found[-1])
    description = str(detail.get("description") or error)
    here = source.quote(token)
    if description.startswith("Expecting "):
        wanted = description.removeprefix("Expecting ").strip()
        source.refuse(token.start, f"expected {wanted!r}, found {here}", found=here, expected=wanted)
    if description.startswith("Required keyword"):
        source.refuse(
            token.start,
            f"expected a value or a condition, found {here}",
            found=here,
            expected="a value or a condition",
        )
    source.refuse(
        token.start,
        f"unexpected {here}; expected AND, OR or the end of the expression, or an operator that fits here",
        found=here,
        expected="AND, OR or the end of the expression",
    )
