"""Loading TOML config files into frozen dataclasses, strictly.

Shared by the broker and the nameserver. Unknown keys and mistyped values are errors that
name the file, the key and what is allowed: a typo in a config file must never be ignored.
"""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path
from typing import Any, TypeVar

from rocketspark.errors import ConfigError

T = TypeVar("T")


def _expected_type(f: dataclasses.Field[Any]) -> type:
    if f.default is not dataclasses.MISSING:
        return type(f.default)
    if f.default_factory is not dataclasses.MISSING:
        return type(f.default_factory())
    return object


def from_mapping(cls: type[T], values: dict[str, Any], source: str) -> T:
    """Build ``cls`` from ``values``, rejecting unknown keys and values of the wrong type."""
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(values) - set(fields))
    if unknown:
        raise ConfigError(f"{source}: unknown key(s) {', '.join(unknown)}; known keys: {', '.join(sorted(fields))}")
    for key, value in values.items():
        expected = _expected_type(fields[key])
        if expected is float and isinstance(value, int) and not isinstance(value, bool):
            continue
        if isinstance(value, bool) != (expected is bool) or not isinstance(value, expected):
            shown = f"got {value!r}" if fields[key].repr else f"got a {type(value).__name__}"  # never show a secret
            raise ConfigError(f"{source}: {key} must be {expected.__name__}, {shown}")
    try:
        return cls(**values)
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from None


def load_toml(path: str | Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None


def load(cls: type[T], path: str | Path | None, overrides: dict[str, Any]) -> T:
    """Read a TOML file (if any) and apply overrides (command-line flags) on top."""
    values = load_toml(path) if path else {}
    values.update({k: v for k, v in overrides.items() if v is not None})
    return from_mapping(cls, values, str(path or "command line"))
