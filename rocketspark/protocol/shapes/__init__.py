"""The declared shape of every request, checked at the edge before any handler runs.

A handler trusts what it reads. It once did not need to be told otherwise: a REGISTER_BROKER
whose broker name was a number was answered SUCCESS, and from then on every route query of
its topics failed with a TypeError, for every client. So both servers' dispatchers call
``check`` on each request first, against one table, ``SHAPES``, which names every request
code the broker and the nameserver serve:

- the header fields (the command's ``ext`` map): types, ranges, string and list lengths;
- the body: a msgpack body (a broker's registration, a static topic's mapping) is decoded
  against its declared shape; a binary body (a send batch) is left to its handler, which
  checks every record with :mod:`rocketspark.codec.ingest`; every other request has none.

A field that breaks its shape is an ``InvalidParameterError`` (INVALID_PARAMETER) whose
message names the request, the field and what is allowed; a body that is not msgpack at all
is a ``MalformedRequestError``. Fields not declared are ignored, as RocketMQ ignores unknown
``extFields``. Registering a handler for a code missing from the table fails at start-up
(``require``), so a new request cannot skip the check.

Limits: queue ids 0-1023 (a topic has at most ``MAX_QUEUES`` queues, as
``broker.topics.MAX_QUEUES``); ``queueId`` -1 on a send means "the broker picks", and
``logicQueueId``, ``gen``, ``epoch`` and ``endOffset`` may be -1 for "none"; offsets are
0..2^63-1; names (brokers, clusters, groups) at most 255 characters, client ids 512; topic
names follow :mod:`rocketspark.protocol.validation`; a request lists at most
``MAX_TOPICS_PER_REQUEST`` topics (clients send more in several requests), and a broker's
registration at most ``MAX_TOPICS_PER_BROKER``. Replica ids of a group are 0-1023, at most
``MAX_REPLICAS`` to a SyncStateSet.

The table is made of one table per request family, each next to its shapes: ``messages``
(send, pull, look-ups), ``offsets``, ``consumers``, ``admin`` (topics, the broker's
permission), ``static`` (static topics), ``replicas`` (HA and the controller), ``acl`` and
``nameserver``; ``fields`` holds the limits they share and ``declared`` a request's shape and
how a breach of it is told.
"""

from __future__ import annotations

from typing import Final

import msgspec

from rocketspark.errors import InvalidParameterError
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.shapes import acl, admin, consumers, messages, nameserver, offsets, replicas, static
from rocketspark.protocol.shapes.declared import RequestShape, explain
from rocketspark.protocol.shapes.fields import (
    MAX_QUEUES,
    MAX_REPLICAS,
    MAX_TOPICS_PER_BROKER,
    MAX_TOPICS_PER_REQUEST,
    Name,
    Offset,
    Perm,
    QueueCount,
    Topic,
)
from rocketspark.protocol.shapes.nameserver import Registration
from rocketspark.protocol.shapes.offsets import ResetOffsetBody
from rocketspark.protocol.shapes.static import MappingDetail

__all__ = [
    "MAX_QUEUES",
    "MAX_REPLICAS",
    "MAX_TOPICS_PER_BROKER",
    "MAX_TOPICS_PER_REQUEST",
    "SHAPES",
    "MappingDetail",
    "Name",
    "Offset",
    "Perm",
    "QueueCount",
    "Registration",
    "RequestShape",
    "ResetOffsetBody",
    "Topic",
    "check",
    "require",
]

_FAMILIES = (messages, offsets, consumers, admin, static, replicas, acl, nameserver)


def _merged() -> dict[int, RequestShape]:
    """The families' tables as one; a code declared by two families is a mistake caught at import."""
    table: dict[int, RequestShape] = {}
    for family in _FAMILIES:
        twice = table.keys() & family.SHAPES.keys()
        if twice:
            raise ValueError(f"request codes {sorted(twice)} are declared twice ({family.__name__})")
        table |= family.SHAPES
    return table


SHAPES: Final[dict[int, RequestShape]] = _merged()


def require(code: int) -> None:
    """Fail at registration for a request code with no declared shape."""
    if code not in SHAPES:
        raise ValueError(f"request code {code} has no declared shape in rocketspark.protocol.shapes.SHAPES")


def check(request: RemotingCommand) -> None:
    """Raise InvalidParameterError (or MalformedRequestError) if the request breaks its shape.
    A code with no shape is left alone: the dispatcher refuses it as unsupported."""
    shape = SHAPES.get(request.code)
    if shape is None:
        return
    try:
        msgspec.convert(request.ext, type=shape.header, strict=True)
    except msgspec.ValidationError as exc:
        raise InvalidParameterError(explain(request.code, "header", str(exc), request.ext)) from None
    shape.check_body(request)
