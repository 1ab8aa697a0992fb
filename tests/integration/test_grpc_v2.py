"""The official RocketMQ 5 Python client (rocketmq-python-client) against our v2 endpoint."""

from __future__ import annotations

import os
import urllib.request
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from prometheus_client.parser import text_string_to_metric_families
from rocketmq import ClientConfiguration, Credentials, FilterExpression, Producer, SimpleConsumer
from rocketmq import Message as V2Message

from rocketspark import Admin, Consumer, LocalCluster
from rocketspark.grpcv2.consuming import Consuming
from rocketspark.grpcv2.endpoint import Endpoint
from rocketspark.grpcv2.sending import Sending
from rocketspark.grpcv2.stubs import definition_pb2 as pb
from rocketspark.grpcv2.stubs import service_pb2 as sv
from rocketspark.grpcv2.stubs import service_pb2_grpc as sv_grpc

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(brokers=2, processes=True, broker_config={"auto_create_topic_enable": False}) as c:
        with Admin(c.nameserver) as admin:
            admin.create_topic("orders", queues=2)
            admin.create_static_topic("static-orders", 3)
        yield c


@pytest.fixture(scope="module")
def stub(cluster: LocalCluster) -> Iterator[sv_grpc.MessagingServiceStub]:
    with grpc.insecure_channel(cluster.grpc_endpoint) as channel:
        yield sv_grpc.MessagingServiceStub(channel)


def official_producer(cluster: LocalCluster, *topics: str) -> Producer:
    producer = Producer(ClientConfiguration(cluster.grpc_endpoint, Credentials()), topics)
    producer.startup()
    return producer


def test_the_official_producer_sends_normal_and_fifo_messages_that_our_consumer_reads(cluster: LocalCluster) -> None:
    producer = official_producer(cluster, "orders", "static-orders")
    try:
        normal = V2Message()
        normal.topic, normal.body, normal.tag, normal.keys = "orders", b"hello", "TagA", "k1"
        normal.add_property("region", "eu")
        sent_id = producer.send(normal).message_id
        fifo_ids = []
        for i in range(6):
            fifo = V2Message()
            fifo.topic, fifo.body, fifo.message_group = "static-orders", f"step-{i}".encode(), "customer-7"
            fifo_ids.append(producer.send(fifo).message_id)
    finally:
        producer.shutdown()
    with Consumer(cluster.nameserver) as consumer:
        stored = [m for q in range(4) for m in consumer.pull("orders", q, 0, 100).messages]
        [message] = stored
        assert (message.body, message.tags, message.keys) == (b"hello", "TagA", ["k1"])
        assert message.properties == {"region": "eu", "UNIQ_KEY": sent_id}
        by_queue = {q: consumer.pull("static-orders", q, 0, 100).messages for q in range(3)}
    [fifo_queue] = [q for q, messages in by_queue.items() if messages]  # one group, one logical queue
    in_order = by_queue[fifo_queue]
    assert [m.body for m in in_order] == [f"step-{i}".encode() for i in range(6)]
    assert [m.properties["UNIQ_KEY"] for m in in_order] == fifo_ids
    assert {m.properties["__SHARDINGKEY"] for m in in_order} == {"customer-7"}


def test_query_route_gives_the_logical_queues_through_this_endpoint(
    cluster: LocalCluster, stub: sv_grpc.MessagingServiceStub
) -> None:
    response = stub.QueryRoute(sv.QueryRouteRequest(topic=pb.Resource(name="static-orders")))
    assert response.status.code == pb.Code.OK
    assert [q.id for q in response.message_queues] == [0, 1, 2]
    host, port = cluster.grpc_endpoint.rsplit(":", 1)
    for queue in response.message_queues:
        assert [(a.host, a.port) for a in queue.broker.endpoints.addresses] == [(host, int(port))]
        assert queue.broker.id == 0 and queue.permission == pb.Permission.READ_WRITE


def test_bad_requests_get_a_clear_status_and_the_endpoint_stays_up(
    cluster: LocalCluster, stub: sv_grpc.MessagingServiceStub
) -> None:
    unknown = stub.QueryRoute(sv.QueryRouteRequest(topic=pb.Resource(name="no-such-topic")))
    assert unknown.status.code == pb.Code.TOPIC_NOT_FOUND and "no-such-topic" in unknown.status.message
    big = pb.Message(topic=pb.Resource(name="orders"), body=os.urandom(4 * 1024 * 1024 + 1))
    big.system_properties.message_id = "01-too-big"
    too_big = stub.SendMessage(sv.SendMessageRequest(messages=[big]))
    assert too_big.status.code == pb.Code.MESSAGE_BODY_TOO_LARGE
    assert "over the limit of 4194304 bytes" in too_big.status.message
    with grpc.insecure_channel(cluster.grpc_endpoint) as channel:
        raw = channel.unary_unary("/apache.rocketmq.v2.MessagingService/SendMessage")
        with pytest.raises(grpc.RpcError) as garbage:
            raw(b"\xff\xff\xff\xff not a protobuf")
    assert garbage.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert garbage.value.details().startswith("malformed SendMessageRequest: ")
    refused = [
        v
        for url in cluster.metrics_urls.values()
        for family in text_string_to_metric_families(urllib.request.urlopen(url, timeout=10).read().decode())
        for name, labels, v, *_ in family.samples
        if name == "rocketmq_rpc_latency_count"
        and labels.get("request_code") == "send_message"  # by name, in lower snake case (RocketMQ 5)
        and labels.get("response_code") == "bad_request"
    ]
    assert sum(refused) >= 1  # a request that never reached a handler is in the metrics too
    receive = list(stub.ReceiveMessage(sv.ReceiveMessageRequest(group=pb.Resource(name="g"), batch_size=1)))
    assert receive[0].status.code == pb.Code.BAD_REQUEST and "names no topic" in receive[0].status.message
    again = stub.QueryRoute(sv.QueryRouteRequest(topic=pb.Resource(name="orders")))  # still up
    assert again.status.code == pb.Code.OK and len(again.message_queues) == 4


def test_with_security_on_the_official_client_signs_as_a_user_of_the_cluster() -> None:
    with LocalCluster(brokers=1, processes=True, auth=True) as secured:
        with Admin(secured.nameserver, **secured.client_options) as admin:
            admin.create_topic("orders", queues=1)
            admin.create_user("etl", "etl-secret")
            admin.set_acl("etl", "Topic:orders", ["Pub"])
        config = ClientConfiguration(secured.grpc_endpoint, Credentials("etl", "etl-secret"))
        producer = Producer(config, ("orders",))
        producer.startup()
        try:
            message = V2Message()
            message.topic, message.body = "orders", b"signed"
            assert producer.send(message).message_id
        finally:
            producer.shutdown()
        with grpc.insecure_channel(secured.grpc_endpoint) as channel:
            anonymous = sv_grpc.MessagingServiceStub(channel).QueryRoute(
                sv.QueryRouteRequest(topic=pb.Resource(name="orders"))
            )
        assert anonymous.status.code == pb.Code.UNAUTHORIZED
        assert "the request is not signed" in anonymous.status.message
        with Consumer(secured.nameserver, **secured.client_options) as consumer:
            assert [m.body for m in consumer.pull("orders", 0, 0, 10).messages] == [b"signed"]
        reader = SimpleConsumer(config, "etl-readers", {"orders": FilterExpression()}, await_duration=1)
        reader.startup()
        try:
            with pytest.raises(Exception, match="etl") as refused:  # Pub only: no Sub on the topic or the group
                reader.receive(1, 20)
            assert "Sub" in str(refused.value)
            with Admin(secured.nameserver, **secured.client_options) as admin:
                admin.set_acl("etl", "Topic:orders", ["Pub", "Sub"])
                admin.set_acl("etl", "Group:etl-readers", ["Sub"])
            [message] = reader.receive(1, 20)
            assert message.body == b"signed"
            reader.ack(message)
        finally:
            reader.shutdown()


def test_a_method_not_served_says_so(stub: sv_grpc.MessagingServiceStub) -> None:
    offset = stub.GetOffset(sv.GetOffsetRequest(group=pb.Resource(name="g")))
    assert offset.status.code == pb.Code.NOT_IMPLEMENTED and "GetOffset is not served" in offset.status.message
    [pulled] = list(stub.PullMessage(sv.PullMessageRequest(group=pb.Resource(name="g"))))
    assert pulled.status.code == pb.Code.NOT_IMPLEMENTED


def test_a_send_never_creates_a_topic_even_where_brokers_auto_create() -> None:
    """Creating needs Create, which a v2 send is not checked for: the endpoint never auto-creates."""
    with LocalCluster(brokers=1) as auto:  # auto_create_topic_enable on
        with grpc.insecure_channel(auto.grpc_endpoint) as channel:
            stub = sv_grpc.MessagingServiceStub(channel)
            message = pb.Message(topic=pb.Resource(name="brand-new"), body=b"x")
            message.system_properties.message_id = "01-new"
            answer = stub.SendMessage(sv.SendMessageRequest(messages=[message]))
        assert answer.status.code == pb.Code.TOPIC_NOT_FOUND
        with Admin(auto.nameserver) as admin:
            assert "brand-new" not in admin.topics()


# -- every field at the edge ------------------------------------------------------------------

WORDS = (FieldDescriptor.TYPE_STRING, FieldDescriptor.TYPE_BYTES, FieldDescriptor.TYPE_BOOL)
# What each kind of field is fed: each value is out of range for every field of its kind.
BAD_INTEGERS = (-1, 2**31 - 1)  # negative; the largest int32 (no count, id or size goes that high)
BAD_PRIORITIES = (-1,)  # a priority is no count: RocketMQ takes every one from 0 up
BAD_INT64S = (-1, -(2**63))
BAD_FLOATS = (float("nan"), float("inf"), -1.0)
BAD_ENUMS = (-1, 12345)  # numbers no enum of the protocol defines
BAD_TIMESTAMPS = (  # (seconds, nanos)
    (100, -1),  # nanos out of range
    (100, 10**9),
    (-1, 0),  # before 1970
    (-(10**13), 0),  # before the year 1: what datetime and protobuf refuse
    (10**17, 0),  # past the year 9999 even read as milliseconds
)
BAD_DURATIONS = (
    (0, 10**9),  # nanos out of range
    (1, -1),  # seconds and nanos of opposite signs
    (-1, 0),  # negative
    (10**7, 0),  # 115 days: longer than any the endpoint takes
    (10**15, 0),  # beyond protobuf's 10,000 years
)


def bad_values(field: FieldDescriptor) -> tuple[object, ...]:
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        return BAD_TIMESTAMPS if field.message_type.full_name == "google.protobuf.Timestamp" else BAD_DURATIONS
    if field.type == FieldDescriptor.TYPE_ENUM:
        return BAD_ENUMS
    if field.type in (FieldDescriptor.TYPE_FLOAT, FieldDescriptor.TYPE_DOUBLE):
        return BAD_FLOATS
    return BAD_INT64S if field.type == FieldDescriptor.TYPE_INT64 else BAD_INTEGERS


def numeric_fields(
    descriptor: Descriptor, prefix: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], FieldDescriptor]]:
    """Every numeric, enum, time and duration field under ``descriptor``, by its path of names."""
    for field in descriptor.fields:
        path = (*prefix, field.name)
        if field.type == FieldDescriptor.TYPE_MESSAGE and field.message_type.GetOptions().map_entry:
            continue
        if field.type == FieldDescriptor.TYPE_MESSAGE and not field.message_type.full_name.startswith(
            "google.protobuf"
        ):
            yield from numeric_fields(field.message_type, path)
        elif field.type not in WORDS:
            yield path, field


def set_field(request: Message, path: tuple[str, ...], field: FieldDescriptor, value: object) -> None:
    """``value`` at ``path`` in ``request`` (the first element of a repeated field on the way)."""
    holder: Any = request
    for name in path[:-1]:
        holder = getattr(holder, name)
        if not isinstance(holder, Message):  # a repeated message field
            holder = holder[0] if len(holder) else holder.add()
    leaf = path[-1]
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        target = getattr(holder, leaf)
        target = target.add() if field.is_repeated else target
        target.seconds, target.nanos = value  # type: ignore[misc]
    elif field.is_repeated:
        getattr(holder, leaf).append(value)
    else:
        setattr(holder, leaf, value)


def in_range_requests() -> dict[str, Message]:
    """A request of each served method whose every numeric field is in range."""
    queue = pb.MessageQueue(topic=pb.Resource(name="orders"))
    settings = pb.Settings(client_type=pb.ClientType.SIMPLE_CONSUMER)
    return {
        "QueryRoute": sv.QueryRouteRequest(topic=pb.Resource(name="orders")),
        "Heartbeat": sv.HeartbeatRequest(client_type=pb.ClientType.PRODUCER),
        "SendMessage": sv.SendMessageRequest(messages=[pb.Message(topic=pb.Resource(name="orders"), body=b"x")]),
        "QueryAssignment": sv.QueryAssignmentRequest(topic=pb.Resource(name="orders"), group=pb.Resource(name="g")),
        "ReceiveMessage": sv.ReceiveMessageRequest(group=pb.Resource(name="g"), message_queue=queue, batch_size=1),
        "AckMessage": sv.AckMessageRequest(group=pb.Resource(name="g"), topic=pb.Resource(name="orders")),
        "ForwardMessageToDeadLetterQueue": sv.ForwardMessageToDeadLetterQueueRequest(
            group=pb.Resource(name="g"), topic=pb.Resource(name="orders"), delivery_attempt=1, max_delivery_attempts=1
        ),
        "EndTransaction": sv.EndTransactionRequest(
            topic=pb.Resource(name="orders"), resolution=pb.TransactionResolution.COMMIT
        ),
        "NotifyClientTermination": sv.NotifyClientTerminationRequest(group=pb.Resource(name="g")),
        "ChangeInvisibleDuration": sv.ChangeInvisibleDurationRequest(
            group=pb.Resource(name="g"), topic=pb.Resource(name="orders"), invisible_duration={"seconds": 30}
        ),
        "Telemetry": sv.TelemetryCommand(settings=settings),
        "RecallMessage": sv.RecallMessageRequest(topic=pb.Resource(name="orders")),
    }


def status_of(stub: sv_grpc.MessagingServiceStub, method: str, request: Message) -> pb.Status:
    if method == "Telemetry":
        [answer] = list(stub.Telemetry(iter([request]), timeout=10))
        return answer.status
    if method == "ReceiveMessage":
        [first, *_] = stub.ReceiveMessage(request, timeout=10)  # a status, then the closing stamp
        return first.status
    return getattr(stub, method)(request, timeout=10).status


def test_every_numeric_and_time_field_of_every_served_request_is_range_checked_at_the_edge(
    cluster: LocalCluster, stub: sv_grpc.MessagingServiceStub
) -> None:
    service = sv.DESCRIPTOR.services_by_name["MessagingService"]
    served = [m for m in service.methods if any(hasattr(c, m.name) for c in (Endpoint, Consuming, Sending))]
    requests = in_range_requests()
    assert sorted(m.name for m in served) == sorted(requests)
    fed = 0
    for method in served:
        descriptor = method.input_type
        if method.name == "Telemetry":  # only a command's settings are acted on
            descriptor = descriptor.fields_by_name["settings"].message_type
        for path, field in numeric_fields(descriptor):
            path = ("settings", *path) if method.name == "Telemetry" else path
            for value in BAD_PRIORITIES if field.name == "priority" else bad_values(field):
                request = type(requests[method.name])()
                request.CopyFrom(requests[method.name])
                set_field(request, path, field, value)
                status = status_of(stub, method.name, request)
                where = f"{method.name} {'.'.join(path)} = {value}"
                assert 40000 <= status.code < 50000, f"{where}: {status.code} {status.message}"
                assert path[-1] in status.message, f"{where}: refused for something else: {status.message}"
                fed += 1
    assert fed >= 139  # (each of 45 fields fed 2 to 5 values; a priority 1)
    assert not [*numeric_fields(sv.AckMessageRequest.DESCRIPTOR)]  # these have no numeric field to feed
    assert not [*numeric_fields(sv.NotifyClientTerminationRequest.DESCRIPTOR)]
    broker = next(name for name, endpoint in cluster.grpc_endpoints.items() if endpoint == cluster.grpc_endpoint)
    log = (cluster.data_dir / f"{broker}.log").read_text()
    assert "Traceback" not in log and "unexpected error" not in log
