"""Typed access to request header fields (a command's ``ext`` map).

Every handler reads its fields through these, so a missing or mistyped field always fails
the same way: a MalformedRequestError naming the field, never a KeyError deep in a handler.
"""

from __future__ import annotations

from typing import Any, TypeVar

from rocketspark.errors import MalformedRequestError
from rocketspark.protocol.command import RemotingCommand

_MISSING: Any = object()
T = TypeVar("T")


def _get(cmd: RemotingCommand, key: str, kind: type[T], default: Any) -> T:
    value = cmd.ext.get(key, _MISSING)
    if value is _MISSING or value is None:
        if default is _MISSING:
            raise MalformedRequestError(f'request {cmd.code} is missing the header field "{key}"')
        return default  # type: ignore[no-any-return]
    if kind is int and isinstance(value, bool):
        raise MalformedRequestError(f'header field "{key}" must be an integer, got a boolean')
    if not isinstance(value, kind):
        raise MalformedRequestError(
            f'header field "{key}" must be {kind.__name__}, got {type(value).__name__} ({value!r:.40})'
        )
    return value


def get_str(cmd: RemotingCommand, key: str, default: Any = _MISSING) -> str:
    return _get(cmd, key, str, default)


def get_int(cmd: RemotingCommand, key: str, default: Any = _MISSING) -> int:
    return _get(cmd, key, int, default)


def get_bool(cmd: RemotingCommand, key: str, default: Any = _MISSING) -> bool:
    return _get(cmd, key, bool, default)


def get_list(cmd: RemotingCommand, key: str, default: Any = _MISSING) -> list[Any]:
    return _get(cmd, key, list, default)
