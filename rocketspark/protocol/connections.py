"""A client connection as brokers answer it (GET_CONSUMER_CONNECTION_LIST and its kin): what
a consumer group subscribes to, and the names of the protocols clients speak.

Shared by the brokers' registry (``broker.connections``), the v2 endpoint that feeds it, and
the admin that reads it (``rocketspark.client.connection_admin``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

OURS: Final = "rocketspark"  # our own clients, on our remoting frames
REMOTING: Final = "remoting"  # RocketMQ 4.x clients, on RocketMQ's JSON or binary remoting frames
GRPC: Final = "grpc"  # RocketMQ 5 clients, on a broker's apache.rocketmq.v2 endpoint
TAG: Final = "TAG"
SQL92: Final = "SQL92"


@dataclass(frozen=True, slots=True)
class Subscribed:
    """What a consumer group reads of a topic: a TAG expression ("*": every message) or SQL92."""

    topic: str
    expression_type: str = TAG
    expression: str = "*"

    def wire(self) -> dict[str, str]:
        return {"topic": self.topic, "expressionType": self.expression_type, "expression": self.expression}

    @classmethod
    def from_wire(cls, fields: Mapping[str, Any]) -> Subscribed:
        return cls(str(fields["topic"]), str(fields["expressionType"]), str(fields["expression"]))
