"""What one row of the Spark options' table is: an option as users type it, declared once.

An :class:`Option` holds the option's name, how its text becomes a value
(:mod:`rocketspark.spark.option_values`), its default, the bounds a number keeps and the line
the docs give it. The tables themselves are in :mod:`rocketspark.spark.options`; what is made
from a table lives here: reading a value, refusing an unknown name (with a suggestion) and
the docs' option reference (:func:`reference`, the tables of docs/spark/options.md).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast

from rocketspark.errors import OptionError
from rocketspark.spark.kafka_names import kafka_hint

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Within:
    """The range a whole-number option must keep (``why_most``: the reason for the top)."""

    least: int
    most: int | None = None
    why_most: str = ""

    def check(self, name: str, value: int) -> None:
        if value < self.least:
            raise OptionError(f'option "{name}" must be at least {self.least}, not {value}')
        if self.most is not None and value > self.most:
            raise OptionError(f'option "{name}" must be at most {self.most}{self.why_most}, not {value}')

    def __str__(self) -> str:
        return f"at least {self.least}" if self.most is None else f"{self.least} to {self.most}"


@dataclass(frozen=True, slots=True)
class Option(Generic[T]):
    """One option as users type it, declared once: the parser, its errors and the docs read it.

    ``field`` is the attribute of ``ReaderOptions``/``WriterOptions`` it sets (none: read by
    hand, or ignored); ``shown`` the default as the docs say it, where the value alone would
    not; ``required`` how to set an option that must be set."""

    name: str
    parse: Callable[[str, str], T]
    default: T
    bounds: Within | None = None
    doc: str = ""  # empty: not documented (set by Spark, ignored)
    field: str = ""
    shown: str = ""
    required: str = ""

    def value(self, options: Mapping[str, str]) -> T:
        """This option's value in ``options`` (keys lower-cased), or its default."""
        raw = given(options, self.name)
        if raw is None:
            if self.required:
                raise OptionError(f'option "{self.name}" is required: {self.required}')
            return self.default
        value = self.parse(self.name, raw)
        if self.bounds is not None:
            self.bounds.check(self.name, cast(int, value))
        return value

    def shown_default(self) -> str:
        if self.shown or self.required:
            return self.shown or "required"
        if self.default is None:
            return "none"
        if isinstance(self.default, bool):
            return f"`{str(self.default).lower()}`"
        return f"`{self.default}`" if isinstance(self.default, str) else str(self.default)


def given(options: Mapping[str, str], name: str) -> str | None:
    """The text given for ``name``; None when absent or blank."""
    value = options.get(name.lower())
    return None if value is None or str(value).strip() == "" else str(value).strip()


def known(options: Mapping[str, str], table: Sequence[Option[Any]], kind: str) -> dict[str, str]:
    """``options`` with lower-cased names (as Spark hands them over), each one in ``table``; an
    unknown one is refused with the option it is most likely meant as, or, for a Kafka
    connector option, with ours (:mod:`rocketspark.spark.kafka_names`). The name is echoed as
    Spark gave it, lower-cased: the user's own spelling does not reach the data source."""
    lowered = {str(k).lower(): v for k, v in options.items()}
    names = {o.name.lower(): o.name for o in table}
    for key in lowered:
        if key not in names:
            kafka = kafka_hint(key)
            if kafka is not None:
                raise OptionError(f'unknown {kind} option "{key}"{kafka}')
            close = difflib.get_close_matches(key, list(names), n=1)
            listed = ", ".join(o.name for o in table if o.doc)  # not the names Spark sets itself
            hint = f'; did you mean "{names[close[0]]}"?' if close else f"; known options: {listed}"
            raise OptionError(f'unknown {kind} option "{key}"{hint}')
    return lowered


def reference(table: Sequence[Option[Any]], heading: str) -> str:
    """The docs' option reference: a Markdown table, one row per documented option."""
    rows = [f"| {heading} | default | meaning |", "|---|---|---|"]
    for o in table:
        if o.doc:
            bounds = f" ({o.bounds})" if o.bounds else ""
            rows.append(f"| `{o.name}` | {o.shown_default()} | {o.doc}{bounds} |")
    return "\n".join(rows)


def with_reference(markdown: str, table: Sequence[Option[Any]], heading: str) -> str:
    """``markdown`` with its table headed ``| heading | ...`` replaced by ``reference``'s
    (how the docs' option tables are regenerated); unchanged when it has none."""
    lines = markdown.split("\n")
    start = next((i for i, line in enumerate(lines) if line.startswith(f"| {heading} |")), None)
    if start is None:
        return markdown
    end = start
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    return "\n".join([*lines[:start], reference(table, heading), *lines[end:]])
