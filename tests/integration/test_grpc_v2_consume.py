"""The official RocketMQ 5 consumers (rocketmq-python-client) against our v2 endpoint: pop
consumption, redelivery, the dead-letter queue and FIFO order."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import grpc
import pytest
from rocketmq import (
    ClientConfiguration,
    ConsumeResult,
    Credentials,
    FilterExpression,
    MessageListener,
    Producer,
    PushConsumer,
    SimpleConsumer,
)
from rocketmq import Message as V2Message
from rocketmq.grpc_protocol import FilterType
from rocketmq.v5.exception import BadRequestException

from rocketspark import Admin, Consumer, LocalCluster
from rocketspark.grpcv2.stubs import definition_pb2 as pb
from rocketspark.grpcv2.stubs import service_pb2 as sv
from rocketspark.grpcv2.stubs import service_pb2_grpc as sv_grpc

pytestmark = pytest.mark.integration

MAX_RECONSUME = 2  # three deliveries, then the dead-letter queue


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    config = {"auto_create_topic_enable": False, "pop_min_invisible_ms": 1000, "pop_max_reconsume_times": MAX_RECONSUME}
    with LocalCluster(brokers=2, processes=True, broker_config=config) as c:
        with Admin(c.nameserver) as admin:
            for topic in ("tasks", "poison", "fifo-tasks", "shared-tasks", "filtered"):
                admin.create_topic(topic, queues=2)
            admin.create_static_topic("static-tasks", 3)
        yield c


def send(cluster: LocalCluster, topic: str, bodies: list[bytes], group: str | None = None) -> list[str]:
    producer = Producer(ClientConfiguration(cluster.grpc_endpoint, Credentials()), (topic,))
    producer.startup()
    try:
        ids = []
        for body in bodies:
            message = V2Message()
            message.topic, message.body, message.tag = topic, body, "T"
            if group:
                message.message_group = group
            ids.append(producer.send(message).message_id)
        return ids
    finally:
        producer.shutdown()


def simple_consumer(cluster: LocalCluster, group: str, topic: str) -> SimpleConsumer:
    consumer = SimpleConsumer(
        ClientConfiguration(cluster.grpc_endpoint, Credentials()), group, {topic: FilterExpression()}, await_duration=2
    )
    consumer.startup()
    return consumer


def receive_all(consumer: SimpleConsumer, count: int, invisible_s: int = 20, within_s: float = 20) -> list[object]:
    got: list[object] = []
    deadline = time.monotonic() + within_s
    while len(got) < count and time.monotonic() < deadline:
        got += consumer.receive(16, invisible_s)
    return got


@pytest.mark.parametrize("topic", ["tasks", "static-tasks"])
def test_a_simple_consumer_receives_and_acks_every_message_once(cluster: LocalCluster, topic: str) -> None:
    bodies = [f"{topic}-{i}".encode() for i in range(40)]
    ids = send(cluster, topic, bodies)
    consumer = simple_consumer(cluster, f"g-{topic}", topic)
    try:
        got = receive_all(consumer, 40)
        assert sorted(m.body for m in got) == sorted(bodies)
        assert sorted(m.message_id for m in got) == sorted(ids)
        assert {(m.tag, m.delivery_attempt, m.topic) for m in got} == {("T", 1, topic)}
        for message in got:
            consumer.ack(message)
        assert consumer.receive(16, 20) == []  # all acknowledged: nothing comes back
    finally:
        consumer.shutdown()
    deadline = time.monotonic() + 5
    with Admin(cluster.nameserver) as admin:  # the watermark is the group's committed offset
        while sum(p.lag for p in admin.consumer_progress(f"g-{topic}", topic)) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert sum(p.lag for p in admin.consumer_progress(f"g-{topic}", topic)) == 0


def test_an_unacked_message_comes_back_with_attempt_2_and_then_goes_to_the_dlq(cluster: LocalCluster) -> None:
    [sent] = send(cluster, "poison", [b"poison pill"])
    consumer = simple_consumer(cluster, "g-poison", "poison")
    try:
        attempts = []
        for _ in range(MAX_RECONSUME + 1):
            [message] = receive_all(consumer, 1, invisible_s=1)
            attempts.append(message.delivery_attempt)
            assert message.message_id == sent
        assert attempts == [1, 2, 3]
        time.sleep(1.2)
        again = consumer.receive(16, 1)
        assert again == [], [(m.delivery_attempt, m.topic) for m in again]  # out of attempts: not handed out again
    finally:
        consumer.shutdown()
    with Consumer(cluster.nameserver) as reader:
        deadline = time.monotonic() + 10
        dead: list[object] = []
        while not dead and time.monotonic() < deadline:
            dead = [
                m
                for q in range(len(reader.queues("%DLQ%g-poison")))
                for m in reader.pull("%DLQ%g-poison", q, 0).messages
            ]
            time.sleep(0.2)
        [message] = dead
        assert message.body == b"poison pill"
        assert message.properties["RETRY_TOPIC"] == "poison" and message.properties["UNIQ_KEY"] == sent


def test_a_push_consumer_consumes_a_fifo_group_in_order(cluster: LocalCluster) -> None:
    bodies = [f"step-{i}".encode() for i in range(20)]
    send(cluster, "fifo-tasks", bodies, group="order-42")
    seen: list[bytes] = []
    failed_once: set[bytes] = set()
    done = threading.Event()

    class Listener(MessageListener):
        def consume(self, message: V2Message) -> ConsumeResult:
            if message.body == b"step-5" and message.body not in failed_once:
                failed_once.add(message.body)  # fails once: step-6 must still come after it
                return ConsumeResult.FAILURE
            seen.append(message.body)
            if len(seen) == len(bodies):
                done.set()
            return ConsumeResult.SUCCESS

    consumer = PushConsumer(
        ClientConfiguration(cluster.grpc_endpoint, Credentials()),
        "g-fifo",
        Listener(),
        {"fifo-tasks": FilterExpression()},
    )
    consumer.startup()
    try:
        assert done.wait(30), f"consumed {len(seen)} of {len(bodies)}"
    finally:
        consumer.shutdown()
    assert seen == bodies


@pytest.fixture
def stub(cluster: LocalCluster) -> Iterator[sv_grpc.MessagingServiceStub]:
    with grpc.insecure_channel(cluster.grpc_endpoint) as channel:
        yield sv_grpc.MessagingServiceStub(channel)


def test_bad_consumption_requests_get_a_clear_status(cluster: LocalCluster, stub: sv_grpc.MessagingServiceStub) -> None:
    queue = pb.MessageQueue(topic=pb.Resource(name="tasks"), id=0)
    receive = sv.ReceiveMessageRequest(group=pb.Resource(name="g-bad"), message_queue=queue, batch_size=1)
    receive.invisible_duration.FromMilliseconds(100)  # under the 1 s minimum of this cluster
    [answer, stamp] = list(stub.ReceiveMessage(receive))
    assert answer.status.code == pb.Code.ILLEGAL_INVISIBLE_TIME and "1000 ms" in answer.status.message
    assert stamp.HasField("delivery_timestamp")
    unknown = sv.ReceiveMessageRequest(
        group=pb.Resource(name="g-bad"), message_queue=pb.MessageQueue(topic=pb.Resource(name="nope")), batch_size=1
    )
    [answer, _] = list(stub.ReceiveMessage(unknown))
    assert answer.status.code == pb.Code.TOPIC_NOT_FOUND
    stale = sv.AckMessageRequest(
        group=pb.Resource(name="g-tasks"),
        topic=pb.Resource(name="tasks"),
        entries=[sv.AckMessageEntry(message_id="x", receipt_handle="0.0.deadbeef")],
    )
    answer = stub.AckMessage(stale)
    assert answer.status.code == pb.Code.INVALID_RECEIPT_HANDLE
    assert "names no delivery in flight" in answer.status.message
    garbage = stub.AckMessage(
        sv.AckMessageRequest(
            group=pb.Resource(name="g-tasks"),
            topic=pb.Resource(name="tasks"),
            entries=[sv.AckMessageEntry(receipt_handle="not a handle")],
        )
    )
    assert garbage.status.code == pb.Code.INVALID_RECEIPT_HANDLE
    assert stub.QueryRoute(sv.QueryRouteRequest(topic=pb.Resource(name="tasks"))).status.code == pb.Code.OK


def test_two_endpoints_never_hand_out_one_message_of_a_group_twice(cluster: LocalCluster) -> None:
    bodies = [f"shared-{i}".encode() for i in range(30)]
    send(cluster, "shared-tasks", bodies)
    first, second = (
        SimpleConsumer(
            ClientConfiguration(endpoint, Credentials()), "g-shared", {"shared-tasks": FilterExpression()}, 1
        )
        for endpoint in sorted(cluster.grpc_endpoints.values())[:2]
    )
    first.startup()
    second.startup()
    try:
        seen: list[bytes] = []
        for _ in range(6):  # neither acknowledges: a message handed out twice would show here
            seen += [m.body for m in first.receive(16, 30)]
            seen += [m.body for m in second.receive(16, 30)]
    finally:
        first.shutdown()
        second.shutdown()
    assert sorted(seen) == sorted(bodies)  # all of them, each once: the queues' locks are one endpoint's


SELECTED = "amount > 50 AND TAGS = 'order'"


@pytest.fixture(scope="module")
def filtered(cluster: LocalCluster) -> list[bytes]:
    """30 messages on "filtered", tagged and with an amount or none; the bodies SELECTED selects."""
    producer = Producer(ClientConfiguration(cluster.grpc_endpoint, Credentials()), ("filtered",))
    producer.startup()
    expected = []
    try:
        for i in range(30):
            message = V2Message()
            message.topic, message.body, message.tag = "filtered", f"f-{i}".encode(), ("order", "ping")[i % 2]
            if i % 5:
                message.add_property("amount", str(40 * (i % 4)))
            producer.send(message)
            if i % 5 and 40 * (i % 4) > 50 and i % 2 == 0:
                expected.append(message.body)
    finally:
        producer.shutdown()
    return expected


def test_a_simple_consumer_with_an_sql_filter_receives_exactly_the_selected_messages(
    cluster: LocalCluster, filtered: list[bytes]
) -> None:
    sql = FilterExpression(SELECTED, FilterType.SQL)
    consumer = SimpleConsumer(
        ClientConfiguration(cluster.grpc_endpoint, Credentials()), "g-filtered", {"filtered": sql}, await_duration=2
    )
    consumer.startup()
    try:
        got = receive_all(consumer, len(filtered))
        for message in got:
            consumer.ack(message)
        assert sorted(m.body for m in got) == sorted(filtered)
        assert all(m.tag == "order" and int(m.properties["amount"]) > 50 for m in got)
        assert consumer.receive(16, 20) == []  # the rest were never selected
    finally:
        consumer.shutdown()


def test_a_push_consumer_with_an_sql_filter_consumes_exactly_the_selected_messages(
    cluster: LocalCluster, filtered: list[bytes]
) -> None:
    seen: list[bytes] = []
    done = threading.Event()

    class Listener(MessageListener):
        def consume(self, message: V2Message) -> ConsumeResult:
            seen.append(message.body)
            if len(seen) >= len(filtered):
                done.set()
            return ConsumeResult.SUCCESS

    consumer = PushConsumer(
        ClientConfiguration(cluster.grpc_endpoint, Credentials()),
        "g-filtered-push",
        Listener(),
        {"filtered": FilterExpression(SELECTED, FilterType.SQL)},
    )
    consumer.startup()
    try:
        assert done.wait(30), f"consumed {len(seen)} of {len(filtered)}"
        time.sleep(1.0)  # nothing else arrives
    finally:
        consumer.shutdown()
    assert sorted(seen) == sorted(filtered)


def test_a_bad_sql_filter_is_refused_with_illegal_filter_expression_and_its_position(cluster: LocalCluster) -> None:
    bad = FilterExpression("amount > 50 AND", FilterType.SQL)
    consumer = SimpleConsumer(
        ClientConfiguration(cluster.grpc_endpoint, Credentials()), "g-bad-filter", {"filtered": bad}, await_duration=2
    )
    consumer.startup()
    try:
        with pytest.raises(BadRequestException) as refused:
            consumer.receive(16, 20)
        assert refused.value.code == pb.Code.ILLEGAL_FILTER_EXPRESSION
        assert "at line 1, column 16 (character 15)" in str(refused.value)
        assert "expected a value or a condition, found the end of the expression" in str(refused.value)
    finally:
        consumer.shutdown()
