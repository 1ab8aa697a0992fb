"""The vectorised evaluation of an SQL92 filter over many messages (decoded batch records, or
property columns) agrees with the per-message one, on random expressions and values, and the
broker keeps exactly the records that hold a message the filter passes."""

from __future__ import annotations

import random

import numpy as np
import pytest

from rocketspark.codec.build import encode_messages, stamped_head
from rocketspark.codec.columns import decode
from rocketspark.codec.layout import BODY_AT, LZ4, NONE, ZSTD
from rocketspark.filtering import compile
from rocketspark.filtering.messages import matching_records, property_columns
from rocketspark.protocol.types import Message

NAMES = ("a", "b", "c", "TAGS", "KEYS")
VALUES = (None, "1", "5", "7.5", "-3", "abc", "true", "TRUE", "x", "xy", "", " 5", "05", "3000000000", "NaN", "-0.0")
NUMBERS = ("1", "5", "-3", "7.5", "0.0", "-0.0", "3000000000", "2.5E1", "5L", ".5")
STRINGS = ("'x'", "'xy'", "'abc'", "''", "'5'", "'true'")


def _atom(rng: random.Random) -> str:
    p, q = rng.choice(NAMES), rng.choice(NAMES)
    kind = rng.randrange(9)
    if kind == 0:
        return f"{p} {rng.choice(['>', '>=', '<', '<='])} {rng.choice([*NUMBERS, q])}"
    if kind == 1:
        return f"{rng.choice([*NUMBERS, *STRINGS, 'TRUE', 'FALSE', q])} {rng.choice(['=', '<>'])} {p}"
    if kind == 2:
        return f"{p} {rng.choice(['=', '<>'])} {rng.choice([*NUMBERS, *STRINGS, 'FALSE', q, '-' + q])}"
    if kind == 3:
        low, high = sorted(rng.sample(range(-5, 10), 2))
        bounds = rng.choice([f"{low} AND {high}", f"{q} AND {high}.5", f"-{abs(high)} AND {p}"])
        return f"{p} {rng.choice(['', 'NOT '])}BETWEEN {bounds}"
    if kind == 4:
        items = ", ".join(rng.sample(STRINGS, rng.randint(1, 5)))
        return f"{p} {rng.choice(['', 'NOT '])}IN ({items})"
    if kind == 5:
        return f"{rng.choice([p, '-' + p, '5'])} IS {rng.choice(['', 'NOT '])}NULL"
    if kind == 6:
        test = rng.choice(["CONTAINS", "STARTSWITH", "ENDSWITH"])
        return f"{p} {rng.choice(['', 'NOT '])}{test} {rng.choice(STRINGS)}"
    if kind == 7:
        return rng.choice(["TRUE", "FALSE", "NULL", p, f"NOT {p}"])
    return f"{p} = {q}"


def _expression(rng: random.Random, depth: int) -> str:
    if depth == 0 or rng.random() < 0.3:
        return _atom(rng)
    kind = rng.randrange(3)
    if kind == 0:
        return f"NOT ({_expression(rng, depth - 1)})"
    joiner = " AND " if kind == 1 else " OR "
    return "(" + joiner.join(_expression(rng, depth - 1) for _ in range(rng.randint(2, 3))) + ")"


def _row(rng: random.Random) -> tuple[dict[str, str], str | None, list[str] | None]:
    properties = {n: v for n in ("a", "b", "c", "TAGS", "KEYS") if (v := rng.choice(VALUES)) is not None}
    tag = rng.choice([None, None, "x", "xy", "abc", ""])
    keys = rng.choice([None, [], ["x"], ["abc", "x"]])
    return properties, tag, keys


@pytest.mark.parametrize("seed", range(12))
def test_the_vectorised_evaluation_agrees_with_the_per_message_one(seed: int) -> None:
    rng = random.Random(seed)
    rows = [_row(rng) for _ in range(150)]
    for _ in range(40):
        selector = compile(_expression(rng, 3))
        one_by_one = [selector.matches(p, tag, keys) for p, tag, keys in rows]
        columns = {n: [_Read(p, tag, keys).get(n) for p, tag, keys in rows] for n in selector.names}
        assert selector.mask_rows(columns, len(rows)).tolist() == one_by_one, selector.expression


class _Read:
    """What one message answers for a name, spelled out for the test: TAGS its tag, KEYS its keys."""

    def __init__(self, properties: dict[str, str], tag: str | None, keys: list[str] | None) -> None:
        self.properties, self.tag, self.keys = properties, tag, keys

    def get(self, name: str) -> str | None:
        if name == "TAGS" and self.tag is not None:
            return self.tag
        if name == "KEYS" and self.keys:
            return " ".join(self.keys)
        return self.properties.get(name)


def _messages(rng: random.Random, n: int) -> list[Message]:
    out = []
    for i in range(n):
        properties, tag, keys = _row(rng)
        out.append(Message("T", f"m{i}".encode(), tags=tag, keys=keys or None, properties=properties or None))
    return out


def _stored(batches: list[list[Message]], kind: int = NONE) -> bytes:
    parts, base, phys = [], 0, 0
    for batch in batches:
        record = encode_messages("T", batch, compression_kind=kind)
        parts.append(stamped_head(record, 0, base, phys, 1) + record[BODY_AT:])
        base, phys = base + len(batch), phys + len(record)
    return b"".join(parts)


@pytest.mark.parametrize("kind", [NONE, ZSTD, LZ4])
def test_a_mask_over_decoded_records_is_each_messages_own_match(kind: int) -> None:
    rng = random.Random(kind)
    messages = _messages(rng, 200)
    columns = decode(_stored([messages[:1], messages[1:120], messages[120:]], kind))
    for _ in range(30):
        selector = compile(_expression(rng, 2))
        expected = [selector.matches(m.properties, m.tags, m.keys) for m in messages]
        assert selector.mask(columns).tolist() == expected, selector.expression


def test_property_columns_read_only_the_names_asked_for() -> None:
    messages = [
        Message("T", b"1", tags="t1", keys=["k1", "k2"], properties={"a": "1", "b": "2"}),
        Message("T", b"2"),
        Message("T", b"3", properties={"TAGS": "own", "KEYS": "own keys"}),
    ]
    columns = decode(_stored([messages]))
    assert property_columns(columns, {"a", "TAGS", "KEYS"}) == {
        "a": ["1", None, None],
        "TAGS": ["t1", None, "own"],
        "KEYS": ["k1 k2", None, "own keys"],
    }


def test_the_broker_keeps_exactly_the_records_holding_a_passing_message_at_or_after_the_offset() -> None:
    def msg(amount: int) -> Message:
        return Message("T", b"x", properties={"amount": str(amount)})

    batches = [[msg(1), msg(50)], [msg(2), msg(3)], [msg(60)], [msg(4)]]
    body = _stored(batches)
    selector = compile("amount > 10")
    kept, passed = matching_records(body, selector, 0, None)
    assert passed == 2
    assert [int(m) for m in np.unique(decode(kept).queue_offset)] == [0, 1, 4]  # records 1 and 3, whole
    kept, passed = matching_records(body, selector, 2, None)  # the 50 at offset 1 is before the read
    assert passed == 1 and decode(kept).queue_offset.tolist() == [4]
    kept, passed = matching_records(body, selector, 0, 4)  # the 60 at offset 4 is past the end
    assert passed == 1 and decode(kept).queue_offset.tolist() == [0, 1]
    assert matching_records(body, compile("amount > 100"), 0, None) == (b"", 0)
    assert matching_records(body, compile("amount > 0"), 0, None)[0] is body  # all kept: nothing copied
