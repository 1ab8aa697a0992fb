"""One request's declared shape (``RequestShape``) and how a breach of it is told: a sentence
naming the request, the field and what is allowed, never msgspec's own wording."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import msgspec

from rocketspark.errors import InvalidParameterError, MalformedRequestError
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.shapes.fields import ALLOWED, Shape


@dataclass(frozen=True, slots=True)
class RequestShape:
    header: type[Shape]
    body: type[Shape] | None = None  # a msgpack body of this shape; None: no body
    binary_body: bool = False  # a body its handler decodes and checks

    def check_body(self, request: RemotingCommand) -> None:
        if self.binary_body:
            return
        if self.body is None:
            if request.body:
                raise InvalidParameterError(
                    f"{request_name(request.code)} carries no body; this one has {len(request.body)} bytes"
                )
            return
        try:
            msgspec.msgpack.decode(request.body, type=self.body, strict=True)
        except msgspec.ValidationError as exc:
            raise InvalidParameterError(explain(request.code, "body", str(exc), None)) from None
        except msgspec.DecodeError as undecodable:
            raise MalformedRequestError(
                f"{request_name(request.code)} body is not valid msgpack: {undecodable}"
            ) from None


def request_name(code: int) -> str:
    try:
        return f"{RequestCode(code).name} ({code})"
    except ValueError:
        return f"request {code}"


_AT = re.compile(r"^(?P<what>.*) - at (?P<path>.+)$")
_MISSING = re.compile(r"^Object missing required field `(?P<field>[^`]+)`(?: - at (?P<path>.+))?$")


def explain(code: int, part: str, error: str, fields: dict[str, Any] | None) -> str:
    """msgspec's "Expected `int` >= 0 - at `$.queueId`" as a sentence naming the request."""
    for raw, readable in ALLOWED.items():
        error = error.replace(raw, readable)
    missing = _MISSING.match(error)
    if missing:
        field = _path(missing["path"], missing["field"]) if missing["path"] else missing["field"]
        return f'{request_name(code)}: the {part} field "{field}" is required'
    found = _AT.match(error)
    if found is None:  # the whole body (or header map) has the wrong type
        return f"{request_name(code)}: the {part} is invalid: {_lower(error)}"
    path, what = _path(found["path"]), found["what"]
    got = ""
    if fields is not None and path in fields and ", got" not in what:
        got = f", got {_show(fields[path])}"
    return f'{request_name(code)}: the {part} field "{path}" is invalid: {_lower(what)}{got}'


def _show(value: object) -> str:
    if isinstance(value, list | dict):
        return f"{len(value)} items"
    return f"{value!r:.60}"


def _path(raw: str, field: str | None = None) -> str:
    """ "`$.topics[3].name`" -> "topics[3].name"; "`key` in `$.hostedQueues`" -> "hostedQueues (a key)"."""
    key_in = raw.startswith("`key` in ")
    path = raw.removeprefix("`key` in ").strip("`").removeprefix("$").removeprefix(".")
    if field is not None:
        path = f"{path}.{field}" if path else field
    return f"{path} (a key)" if key_in else path


def _lower(text: str) -> str:
    return text[:1].lower() + text[1:]
