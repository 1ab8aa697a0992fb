"""Typed access to request header fields (a command's ``ext`` map).

Every handler reads its fields through these, so a missing or mistyped field always fails
the same way: a MalformedRequestError naming the field, never a KeyError deep in a handler.
"""

from __future__ import annotations

from typing import Any, TypeVar, overload

from rocketspark.errors import MalformedRequestError
from rocketspark.protocol.command import RemotingCommand

_MISSING: Any = object()
D = TypeVar("D")  # a default of another type (None): the field is then optional


def _get(cmd: RemotingCommand, key: str, kind: type[object], default: Any) -> Any:
    """The field's value, checked against ``kind``; ``default`` (of any type) when it is absent.
    Typed ``Any`` on purpose: the overloads below say what callers get, and a compiled build
    (setup.py) enforces a declared return type at run time, which a None default would break."""
    value = cmd.ext.get(key, _MISSING)
    if value is _MISSING or value is None:
        if default is _MISSING:
            raise MalformedRequestError(f'request {cmd.code} is missing the header field "{key}"')
        return default
    if kind is int and isinstance(value, bool):
        raise MalformedRequestError(f'header field "{key}" must be an integer, got a boolean')
    if not isinstance(value, kind):
        raise MalformedRequestError(
            f'header field "{key}" must be {kind.__name__}, got {type(value).__name__} ({value!r:.40})'
        )
    return value


@overload
def get_str(cmd: RemotingCommand, key: str) -> str: ...
@overload
def get_str(cmd: RemotingCommand, key: str, default: D) -> str | D: ...
def get_str(cmd: RemotingCommand, key: str, default: Any = _MISSING) -> Any:
    return _get(cmd, key, str, default)


@overload
def get_int(cmd: RemotingCommand, key: str) -> int: ...
@overload
def get_int(cmd: RemotingCommand, key: str, default: D) -> int | D: ...
def get_int(cmd: RemotingCommand, key: str, default: Any = _MISSING) -> Any:
    return _get(cmd, key, int, default)


@overload
def get_bool(cmd: RemotingCommand, key: str) -> bool: ...
@overload
def get_bool(cmd: RemotingCommand, key: str, default: D) -> bool | D: ...
def get_bool(cmd: RemotingCommand, key: str, default: Any = _MISSING) -> Any:
    return _get(cmd, key, bool, default)


@overload
def get_list(cmd: RemotingCommand, key: str) -> list[Any]: ...
@overload
def get_list(cmd: RemotingCommand, key: str, default: D) -> list[Any] | D: ...
def get_list(cmd: RemotingCommand, key: str, default: Any = _MISSING) -> Any:
    return _get(cmd, key, list, default)
