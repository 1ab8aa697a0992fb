"""Shapes of the nameserver's requests: brokers registering, routes asked for, the route push."""

from __future__ import annotations

from typing import Annotated, Final

from msgspec import Meta, Struct, field

from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.shapes.declared import RequestShape
from rocketspark.protocol.shapes.fields import (
    MAX_TOPICS_PER_BROKER,
    Address,
    BrokerHeader,
    ClientId,
    Name,
    NoFields,
    Offset,
    Perm,
    QueueCount,
    Shape,
    Topic,
    TopicHeader,
    Topics,
)
from rocketspark.protocol.shapes.static import MappingDetail


class RegisterHeader(Shape):
    broker_name: Name | None = None
    cluster_name: Name | None = None


class DataVersionHeader(BrokerHeader):
    """QUERY_DATA_VERSION: does the nameserver hold this broker's registration at this version?"""

    cluster_name: Name
    addr: Address
    version: Offset


class UnregisterHeader(BrokerHeader):
    cluster_name: Name | None = None
    addr: Address | None = None


class ClientHeader(Shape):
    client_id: ClientId


class SubscribeHeader(ClientHeader):
    topics: Topics


class UnsubscribeHeader(ClientHeader):
    topics: Topics | None = None  # none: every topic of the client


class TopicConfigWire(Struct):
    name: Topic
    r: QueueCount
    w: QueueCount
    perm: Perm
    trace: bool = False  # message trace is on for it (absent from brokers of before)


class Registration(Shape):
    """REGISTER_BROKER's body: ``broker.broker.Broker.registration``."""

    broker: Name
    cluster: Name
    addr: Address
    perm: Perm = 6
    version: Offset = 0
    topics: Annotated[list[TopicConfigWire], Meta(max_length=MAX_TOPICS_PER_BROKER)] = field(default_factory=list)
    static: Annotated[list[MappingDetail], Meta(max_length=MAX_TOPICS_PER_BROKER)] = field(default_factory=list)
    changed: Annotated[list[Topic], Meta(max_length=MAX_TOPICS_PER_BROKER)] = field(default_factory=list)
    incremental: bool = False  # only these topics; the nameserver keeps the broker's others


_C = RequestCode
SHAPES: Final[dict[int, RequestShape]] = {
    _C.REGISTER_BROKER: RequestShape(RegisterHeader, Registration),
    _C.UNREGISTER_BROKER: RequestShape(UnregisterHeader),
    _C.QUERY_DATA_VERSION: RequestShape(DataVersionHeader),
    _C.GET_ROUTEINFO_BY_TOPIC: RequestShape(TopicHeader),
    _C.GET_BROKER_CLUSTER_INFO: RequestShape(NoFields),
    _C.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: RequestShape(NoFields),
    _C.DELETE_TOPIC_IN_NAMESRV: RequestShape(TopicHeader),
    _C.WIPE_WRITE_PERM_OF_BROKER: RequestShape(BrokerHeader),
    _C.ADD_WRITE_PERM_OF_BROKER: RequestShape(BrokerHeader),
    _C.OPEN_PUSH_STREAM: RequestShape(ClientHeader),
    _C.SUBSCRIBE_TOPIC_ROUTE: RequestShape(SubscribeHeader),
    _C.UNSUBSCRIBE_TOPIC_ROUTE: RequestShape(UnsubscribeHeader),
}
