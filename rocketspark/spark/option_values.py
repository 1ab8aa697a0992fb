"""What the text of a ``format("rocketmq")`` option may say, one reader per kind of value.

Each reader takes the option's name as documented and its text (given, stripped, not empty)
and returns the value, or raises :class:`OptionError` with one sentence that names the option
and the fix. :mod:`rocketspark.spark.options` says which option is read by which.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

from rocketspark.client.nameservers import resolve_nameservers
from rocketspark.client.pulling import parse_tags
from rocketspark.errors import InvalidAddressError, NoNameServerError, OptionError
from rocketspark.filtering import IllegalFilterExpressionError, compile_cached

EARLIEST: Final = -2  # in JSON offsets, as in Kafka
LATEST: Final = -1

OffsetSpec = str | dict[str, dict[int, int]]  # "earliest" / "latest" / {topic: {queue: offset}}


def text(name: str, raw: str) -> str:
    return raw


def whole(name: str, raw: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise OptionError(f'option "{name}" must be a whole number, not "{raw}"') from None


def boolean(name: str, raw: str) -> bool:
    if raw.lower() in ("true", "1", "yes"):
        return True
    if raw.lower() in ("false", "0", "no"):
        return False
    raise OptionError(f'option "{name}" must be true or false, not "{raw}"')


_DURATION: Final = re.compile(r"^(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?$")
_UNIT_MS: Final = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, None: 1}


def duration_ms(name: str, raw: str) -> int:
    match = _DURATION.match(raw.lower())
    if not match:
        raise OptionError(f'option "{name}" must be a duration like 500ms, 30s, 15m or 1h, not "{raw}"')
    return int(float(match.group(1)) * _UNIT_MS[match.group(2)])


def json_value(name: str, raw: str, example: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise OptionError(f'option "{name}" is not valid JSON ({exc}); use {example}') from None


def nameservers(name: str, raw: str) -> tuple[str, ...]:
    try:
        return tuple(resolve_nameservers(raw))
    except (InvalidAddressError, NoNameServerError) as exc:
        raise OptionError(f'option "{name}": {exc.message}') from None


def topic_list(name: str, raw: str) -> tuple[str, ...]:
    return tuple(t.strip() for t in raw.split(",") if t.strip())


def pattern(name: str, raw: str) -> str:
    try:
        re.compile(raw)
    except re.error as exc:
        raise OptionError(f'option "{name}" is not a valid regular expression: {exc}') from None
    return raw


def assignment(name: str, raw: str) -> dict[str, tuple[int, ...]]:
    parsed = json_value(name, raw, '{"orders": [0, 1, 2]}')
    if not isinstance(parsed, dict) or not all(
        isinstance(v, list) and all(isinstance(q, int) and q >= 0 for q in v) for v in parsed.values()
    ):
        raise OptionError(f'option "{name}" must be JSON like {{"orders": [0, 1, 2]}} (logical queue ids)')
    return {t: tuple(sorted(set(v))) for t, v in parsed.items()}


def timestamp_strategy(name: str, raw: str) -> str:
    if raw.lower() not in ("error", "latest"):
        raise OptionError(f'option "{name}" must be "error" or "latest"')
    return raw.lower()


def offsets(name: str, raw: str) -> OffsetSpec:
    """``earliest``, ``latest`` or JSON offsets per topic and logical queue."""
    if raw.lower() in ("earliest", "latest"):
        return raw.lower()
    parsed = json_value(name, raw, '"earliest", "latest" or {"orders": {"0": 42}}')
    return queue_map(name, parsed, offsets=True)


def timestamps(name: str, raw: str) -> dict[str, dict[int, int]] | None:
    """A timestamp (ms) per topic and logical queue; an empty JSON value is no option."""
    parsed = json_value(name, raw, '{"orders": {"0": 1700000000000}}')
    return queue_map(name, parsed, offsets=False) if parsed else None


def queue_map(name: str, parsed: Any, *, offsets: bool) -> dict[str, dict[int, int]]:
    what = "an offset (-2 earliest, -1 latest)" if offsets else "a timestamp in ms"
    if not isinstance(parsed, dict) or not parsed:
        raise OptionError(f'option "{name}" must be a JSON object like {{"orders": {{"0": 42}}}}')
    out: dict[str, dict[int, int]] = {}
    for topic, queues in parsed.items():
        if not isinstance(queues, dict):
            raise OptionError(f'option "{name}": the value for topic "{topic}" must map queue ids to {what}')
        out[topic] = {}
        for queue, value in queues.items():
            if not str(queue).isdigit() or not isinstance(value, int) or isinstance(value, bool):
                raise OptionError(f'option "{name}": queue "{queue}" of "{topic}" must be a queue id mapped to {what}')
            if offsets and value < EARLIEST:
                raise OptionError(
                    f'option "{name}": offset {value} of {topic}/{queue} is not valid; use >= 0, -2 or -1'
                )
            out[topic][int(queue)] = value
    return out


def tags(name: str, raw: str) -> tuple[str, ...] | None:
    parsed = parse_tags(raw)
    return tuple(parsed) if parsed else None


def sql(name: str, raw: str) -> str:
    """An SQL92 filter, compiled now: a bad expression fails the query at its start."""
    try:
        compile_cached(raw)
    except IllegalFilterExpressionError as exc:
        raise OptionError(f'option "{name}": {exc.message}') from None
    return raw
