"""What RocketMQ 5.4-5.5 clients send, from the official Python client (5.1.2 has all three):
priority messages (RIP-80) popped highest first, RecallMessage for a delay message not due yet,
and lite topics (RIP-83), which are not served and say so."""

from __future__ import annotations

import time
from collections.abc import Iterator

import grpc
import pytest
from rocketmq import ClientConfiguration, Credentials, FilterExpression, LiteSimpleConsumer, Producer, SimpleConsumer
from rocketmq import Message as V2Message
from rocketmq.v5.exception import (
    IllegalArgumentException,
    InternalErrorException,
    LiteSubscriptionQuotaExceededException,
    UnsupportedException,
)

from rocketspark import Admin, Consumer, LocalCluster
from rocketspark.grpcv2.stubs import definition_pb2 as pb
from rocketspark.grpcv2.stubs import service_pb2 as sv
from rocketspark.grpcv2.stubs import service_pb2_grpc as sv_grpc
from rocketspark.protocol.types import MessageExt

pytestmark = pytest.mark.integration

PRIORITY = "_SYS_MSG_PRIORITY_"


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(brokers=2, processes=True, broker_config={"auto_create_topic_enable": False}) as c:
        with Admin(c.nameserver) as admin:
            for topic in ("ranked", "later", "bound"):
                admin.create_topic(topic, queues=2)  # on each broker: 4 logical queues
        yield c


def configuration(endpoint: str) -> ClientConfiguration:
    return ClientConfiguration(endpoint, Credentials())


def producer_at(endpoint: str, topic: str) -> Producer:
    producer = Producer(configuration(endpoint), (topic,))
    producer.startup()
    return producer


def stored(cluster: LocalCluster, topic: str) -> list[MessageExt]:
    with Consumer(cluster.nameserver) as consumer:
        return [m for q in range(4) for m in consumer.pull(topic, q, 0, 100).messages]


def v2_message(topic: str, body: bytes) -> V2Message:
    message = V2Message()
    message.topic, message.body = topic, body
    return message


def test_priority_messages_are_stored_in_the_queue_of_their_priority_and_popped_highest_first(
    cluster: LocalCluster,
) -> None:
    priorities = [0, 5, 2, 9, 1, 3, 7, 2]
    producer = producer_at(cluster.grpc_endpoint, "ranked")
    try:
        for i, priority in enumerate(priorities):
            message = v2_message("ranked", f"{i}".encode())
            message.priority = priority
            producer.send(message)
    finally:
        producer.shutdown()
    kept = {int(m.body): (m.queue_id, m.properties[PRIORITY]) for m in stored(cluster, "ranked")}
    assert kept == {i: (min(p, 3), str(p)) for i, p in enumerate(priorities)}  # min(priority, queues - 1)
    consumer = SimpleConsumer(configuration(cluster.grpc_endpoint), "rankers", {"ranked": FilterExpression()}, 5)
    consumer.startup()
    try:
        received = consumer.receive(32, 30)
        for message in received:
            consumer.ack(message)
    finally:
        consumer.shutdown()
    assert [m.priority for m in received] == sorted(priorities, reverse=True)
    assert [int(m.body) for m in received][-4:] == [2, 7, 4, 0]  # the two of priority 2 in order, then 1, 0


def test_a_delay_message_recalled_before_its_time_is_never_delivered_whichever_endpoint_is_asked(
    cluster: LocalCluster,
) -> None:
    first, second = list(cluster.grpc_endpoints.values())
    producer = producer_at(first, "later")
    other = producer_at(second, "later")
    try:
        due = int(time.time() * 1000) + 3000
        receipts = []
        for body in (b"recalled here", b"recalled there", b"kept"):
            message = v2_message("later", body)
            message.delivery_timestamp = due
            receipts.append(producer.send(message))
        assert all(r.recall_handle for r in receipts)
        assert producer.recall_message("later", receipts[0].recall_handle) == receipts[0].message_id
        assert other.recall_message("later", receipts[1].recall_handle) == receipts[1].message_id
        assert producer.recall_message("later", receipts[0].recall_handle) == receipts[0].message_id  # again: OK
        with pytest.raises(InternalErrorException, match="recall failed, topic not match"):
            producer.recall_message("ranked", receipts[2].recall_handle)
        deadline = time.monotonic() + (due - time.time() * 1000) / 1000 + 5
        while not stored(cluster, "later") and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1.5)  # a recalled message would have come with the kept one
        assert [m.body for m in stored(cluster, "later")] == [b"kept"]
        with pytest.raises(InternalErrorException, match=r"recall failed, timestamp invalid: .*delivered"):
            producer.recall_message("later", receipts[2].recall_handle)
        with pytest.raises(InternalErrorException, match="recall handle is invalid"):
            producer.recall_message("later", "bm90IGEgaGFuZGxl")
    finally:
        producer.shutdown()
        other.shutdown()


@pytest.fixture
def stub(cluster: LocalCluster) -> Iterator[sv_grpc.MessagingServiceStub]:
    with grpc.insecure_channel(cluster.grpc_endpoint) as channel:
        yield sv_grpc.MessagingServiceStub(channel)


# The Python client logs a status it has no exception class for with Logger.warn, deprecated.
@pytest.mark.filterwarnings("ignore:The 'warn' method is deprecated:DeprecationWarning")
def test_lite_topics_are_refused_with_not_implemented_and_what_to_use_instead(
    cluster: LocalCluster, stub: sv_grpc.MessagingServiceStub
) -> None:
    synced = stub.SyncLiteSubscription(
        sv.SyncLiteSubscriptionRequest(
            action=pb.LiteSubscriptionAction.PARTIAL_ADD,
            topic=pb.Resource(name="bound"),
            group=pb.Resource(name="sessions"),
            lite_topic_set=["session-1"],
        )
    )
    assert synced.status.code == pb.Code.NOT_IMPLEMENTED
    assert "SyncLiteSubscription is not served" in synced.status.message
    assert "send to a normal topic with a message_group per session" in synced.status.message
    lite = pb.Message(topic=pb.Resource(name="bound"), body=b"x")
    lite.system_properties.lite_topic = "session-1"
    lite.system_properties.message_type = pb.MessageType.LITE
    sent = stub.SendMessage(sv.SendMessageRequest(messages=[lite]))
    assert sent.status.code == pb.Code.NOT_IMPLEMENTED and "lite topics (RocketMQ 5.5, RIP-83)" in sent.status.message
    beat = stub.Heartbeat(sv.HeartbeatRequest(client_type=pb.ClientType.LITE_PUSH_CONSUMER))
    assert beat.status.code == pb.Code.NOT_IMPLEMENTED
    # The official producer refuses a lite message itself: the route accepts no LITE type.
    producer = producer_at(cluster.grpc_endpoint, "bound")
    try:
        message = v2_message("bound", b"x")
        message.lite_topic = "session-1"
        with pytest.raises(IllegalArgumentException, match="accept message types"):
            producer.send(message)
    finally:
        producer.shutdown()
    # The official lite consumer starts (its settings are refused, so it keeps a quota of 0),
    # can subscribe to nothing, and its receives are refused once the endpoint heard what it is.
    consumer = LiteSimpleConsumer("bound", configuration(cluster.grpc_endpoint), "sessions", await_duration=1)
    consumer.startup()
    try:
        with pytest.raises(LiteSubscriptionQuotaExceededException, match="quota: 0"):
            consumer.subscribe_lite("session-1")
        assert refused_receive(consumer, within_s=30).startswith("a lite consumer's receive: lite topics")
    finally:
        consumer.shutdown()
    assert stored(cluster, "bound") == []


def refused_receive(consumer: LiteSimpleConsumer, within_s: float) -> str:
    """The refusal's message: its settings go out as it starts, and may arrive after a receive."""
    deadline = time.monotonic() + within_s
    while True:
        try:
            consumer.receive(1, 20)
        except UnsupportedException as refused:
            return str(refused.args[0] if refused.args else refused)
        assert time.monotonic() < deadline, "a lite consumer's receive was served"
