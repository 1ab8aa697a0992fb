"""rocketspark: a RocketMQ-style broker in Python and a PySpark source and sink for it.

The public API (names are part of the contract)::

    from rocketspark import LocalCluster, Producer, Consumer, Admin, Message

Heavy modules load lazily: importing ``rocketspark`` does not start gRPC or Spark.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rocketspark.errors import RocketSparkError
from rocketspark.protocol.replica import Replica, ReplicaGroup
from rocketspark.protocol.types import Message, MessageExt, PullResult, PullStatus, SendResult, SendStatus

if TYPE_CHECKING:
    from rocketspark.client.admin import Admin
    from rocketspark.client.consumer import Consumer
    from rocketspark.client.group_consumer import GroupConsumer
    from rocketspark.client.producer import Producer
    from rocketspark.cluster import LocalCluster
    from rocketspark.spark.datasource import check_submit, register

__all__ = [
    "Admin",
    "Consumer",
    "GroupConsumer",
    "LocalCluster",
    "Message",
    "MessageExt",
    "Producer",
    "PullResult",
    "PullStatus",
    "Replica",
    "ReplicaGroup",
    "RocketSparkError",
    "SendResult",
    "SendStatus",
    "check_submit",
    "register",
]

_LAZY = {
    "Admin": "rocketspark.client.admin",
    "Consumer": "rocketspark.client.consumer",
    "GroupConsumer": "rocketspark.client.group_consumer",
    "Producer": "rocketspark.client.producer",
    "LocalCluster": "rocketspark.cluster",
    "register": "rocketspark.spark.datasource",
    "check_submit": "rocketspark.spark.datasource",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'rocketspark' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
