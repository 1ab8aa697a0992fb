"""Shapes of the ACL table's requests, which both servers answer."""

from __future__ import annotations

from typing import Annotated, Final

from msgspec import Meta, Struct

from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.shapes.declared import RequestShape
from rocketspark.protocol.shapes.fields import NAME_MAX, NoFields, Offset, Shape


class UserWire(Struct):
    name: Annotated[str, Meta(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.\-]+$")]
    secret: Annotated[str, Meta(min_length=1, max_length=1024)]
    type: Annotated[str, Meta(pattern=r"^(Super|Normal)$")]
    policies: Annotated[
        list[tuple[Annotated[str, Meta(max_length=NAME_MAX + 6)], list[str], str]], Meta(max_length=10_000)
    ] = []


class AclTableBody(Shape):
    version: Offset
    users: Annotated[list[UserWire], Meta(max_length=100_000)]


_C = RequestCode
SHAPES: Final[dict[int, RequestShape]] = {
    _C.AUTH_GET_TABLE: RequestShape(NoFields),
    _C.AUTH_PUT_TABLE: RequestShape(NoFields, AclTableBody),
}
