"""Delay and transactional messages from the official RocketMQ 5 producer, and what survives a
broker restart: held messages, and messages no consumer acknowledged yet."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import grpc
import pytest
from rocketmq import (
    ClientConfiguration,
    Credentials,
    FilterExpression,
    Producer,
    SimpleConsumer,
    TransactionChecker,
    TransactionResolution,
)
from rocketmq import Message as V2Message

from rocketspark import Admin, Consumer, LocalCluster
from rocketspark.grpcv2.stubs import definition_pb2 as pb
from rocketspark.grpcv2.stubs import service_pb2 as sv
from rocketspark.grpcv2.stubs import service_pb2_grpc as sv_grpc
from rocketspark.protocol.types import MessageExt

pytestmark = pytest.mark.integration

CHECK = {"transaction_timeout_ms": 500, "transaction_check_interval_ms": 500, "transaction_check_max": 3}


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    config = {"auto_create_topic_enable": False, "pop_min_invisible_ms": 1000, **CHECK}
    with LocalCluster(brokers=2, processes=True, broker_config=config) as c:
        with Admin(c.nameserver) as admin:
            for topic in ("later", "later-ms", "payments", "durable"):
                admin.create_topic(topic, queues=2)
        yield c


def everything(cluster: LocalCluster, topic: str) -> list[MessageExt]:
    with Consumer(cluster.nameserver) as consumer:
        return [m for q in range(4) for m in consumer.pull(topic, q, 0, 100).messages]


def wait_for(cluster: LocalCluster, topic: str, count: int, within_s: float) -> list[MessageExt]:
    deadline = time.monotonic() + within_s
    while len(found := everything(cluster, topic)) < count and time.monotonic() < deadline:
        time.sleep(0.05)
    return found


def message(topic: str, body: bytes) -> V2Message:
    m = V2Message()
    m.topic, m.body, m.tag, m.keys = topic, body, "T", "k"
    m.add_property("origin", "billing")
    return m


def test_a_delay_message_is_invisible_before_its_time_and_visible_within_a_second_after(
    cluster: LocalCluster,
) -> None:
    producer = Producer(ClientConfiguration(cluster.grpc_endpoint, Credentials()), ("later",))
    producer.startup()
    try:
        delayed = message("later", b"in three seconds")
        # This client puts the timestamp into Timestamp.seconds as given: whole seconds work too.
        due = int(time.time()) + 3
        delayed.delivery_timestamp = due
        sent_id = producer.send(delayed).message_id
    finally:
        producer.shutdown()
    while time.time() < due - 0.3:
        assert everything(cluster, "later") == []
        time.sleep(0.1)
    [arrived] = wait_for(cluster, "later", 1, within_s=due + 1.5 - time.time())
    assert time.time() <= due + 1.0 + 0.1  # the poll's own step
    assert arrived.store_timestamp >= due * 1000 - 50
    assert arrived.store_timestamp <= due * 1000 + 1000
    assert (arrived.body, arrived.tags, arrived.keys) == (b"in three seconds", "T", ["k"])
    # it keeps its due time, as RocketMQ 5's delivered timer messages do (a delay message, in the metrics)
    assert arrived.properties == {"origin": "billing", "UNIQ_KEY": sent_id, "TIMER_DELIVER_MS": str(due * 1000)}


def test_a_delay_message_timed_in_milliseconds_as_the_python_clients_docs_show_is_delivered_at_its_time(
    cluster: LocalCluster,
) -> None:
    producer = Producer(ClientConfiguration(cluster.grpc_endpoint, Credentials()), ("later-ms",))
    producer.startup()
    try:
        delayed = message("later-ms", b"in three seconds")
        due_ms = int(time.time() * 1000) + 3000
        delayed.delivery_timestamp = due_ms  # its docs: milliseconds (it writes them into Timestamp.seconds)
        sent_id = producer.send(delayed).message_id
    finally:
        producer.shutdown()
    while time.time() * 1000 < due_ms - 300:
        assert everything(cluster, "later-ms") == []
        time.sleep(0.1)
    [arrived] = wait_for(cluster, "later-ms", 1, within_s=due_ms / 1000 + 1.5 - time.time())
    assert due_ms - 50 <= arrived.store_timestamp <= due_ms + 1000
    assert (arrived.body, arrived.properties["UNIQ_KEY"]) == (b"in three seconds", sent_id)


def end_as(cluster: LocalCluster, topic: str, transaction_id: str) -> int:
    with grpc.insecure_channel(cluster.grpc_endpoint) as channel:
        request = sv.EndTransactionRequest(
            topic=pb.Resource(name=topic), transaction_id=transaction_id, resolution=pb.TransactionResolution.COMMIT
        )
        return int(sv_grpc.MessagingServiceStub(channel).EndTransaction(request).status.code)


class Checker(TransactionChecker):
    def __init__(self) -> None:
        self.asked: list[str] = []
        self.done = threading.Event()

    def check(self, message: V2Message) -> TransactionResolution:
        self.asked.append(message.message_id)
        self.done.set()
        return TransactionResolution.COMMIT


def test_transactions_commit_roll_back_and_an_unknown_outcome_is_checked_back(cluster: LocalCluster) -> None:
    checker = Checker()
    producer = Producer(ClientConfiguration(cluster.grpc_endpoint, Credentials()), ("payments",), checker)
    producer.startup()
    try:
        ids = {}
        for body, ending in ((b"committed", "commit"), (b"rolled back", "rollback"), (b"unknown", None)):
            transaction = producer.begin_transaction()
            receipt = producer.send(message("payments", body), transaction)
            ids[body] = receipt.message_id
            time.sleep(0.3)
            assert everything(cluster, "payments") == [] if body == b"committed" else True  # a half is invisible
            if ending == "rollback":  # a caller may end only a transaction of the topic it names
                assert end_as(cluster, "later", receipt.transaction_id) == pb.Code.INVALID_TRANSACTION_ID
            if ending == "commit":
                transaction.commit()
            elif ending == "rollback":
                transaction.rollback()
        assert checker.done.wait(10), "the endpoint never checked back the transaction left open"
        stored = wait_for(cluster, "payments", 2, within_s=5)
    finally:
        producer.shutdown()
    assert checker.asked[0] == ids[b"unknown"]
    assert sorted(m.body for m in stored) == [b"committed", b"unknown"]
    for m in stored:
        assert m.properties == {"origin": "billing", "UNIQ_KEY": ids[m.body], "TRAN_MSG": "true"}  # its type
    time.sleep(1.5)  # resolved: not checked again
    assert checker.asked == [ids[b"unknown"]]


def test_after_a_broker_restart_held_and_unacknowledged_messages_are_still_delivered(cluster: LocalCluster) -> None:
    producer = Producer(ClientConfiguration(cluster.grpc_endpoint, Credentials()), ("durable",))
    producer.startup()
    try:
        bodies = [f"m-{i}".encode() for i in range(10)]
        for body in bodies:
            producer.send(message("durable", body))
        delayed = message("durable", b"delayed")
        due = int(time.time()) + 6
        delayed.delivery_timestamp = due
        producer.send(delayed)
    finally:
        producer.shutdown()
    group = "g-durable"
    consumer = SimpleConsumer(
        ClientConfiguration(cluster.grpc_endpoint, Credentials()), group, {"durable": FilterExpression()}, 2
    )
    consumer.startup()
    try:
        got = []
        while len(got) < 10:
            got += consumer.receive(32, 30)
        for m in got[:4]:  # four acknowledged, six in flight
            consumer.ack(m)
        time.sleep(1.5)  # the watermark is stored once a second
    finally:
        consumer.shutdown()
    assert b"delayed" not in {m.body for m in everything(cluster, "durable")}  # still held when it crashes
    for name in sorted(cluster.brokers):  # a crash, not a clean stop
        cluster.kill_broker(name)
        cluster.start_broker(name)
    consumer = SimpleConsumer(
        ClientConfiguration(cluster.grpc_endpoint, Credentials()), group, {"durable": FilterExpression()}, 2
    )
    consumer.startup()
    try:
        again: list[V2Message] = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not {b"delayed", *bodies[4:]} <= {m.body for m in again}:
            batch = consumer.receive(32, 30)
            again += batch
            for m in batch:
                consumer.ack(m)
    finally:
        consumer.shutdown()
    received = {m.body for m in again}
    assert {b"delayed", *(m.body for m in got[4:])} <= received  # nothing unacknowledged is lost
    assert received <= {b"delayed", *bodies}


def test_bad_delay_and_transaction_requests_get_a_clear_status(cluster: LocalCluster) -> None:
    def v2(topic: str, **system: object) -> pb.Message:
        message = pb.Message(topic=pb.Resource(name=topic), body=b"x")
        message.system_properties.message_id = "01-bad"
        for name, value in system.items():
            setattr(message.system_properties, name, value)
        return message

    with grpc.insecure_channel(cluster.grpc_endpoint) as channel:
        stub = sv_grpc.MessagingServiceStub(channel)
        later = v2("no-such-topic")
        later.system_properties.delivery_timestamp.FromMilliseconds(int(time.time() * 1000) + 60_000)
        answer = stub.SendMessage(sv.SendMessageRequest(messages=[later]))
        assert answer.status.code == pb.Code.TOPIC_NOT_FOUND  # refused now, not dropped at its time
        too_late = v2("later")
        too_late.system_properties.delivery_timestamp.FromMilliseconds(int(time.time() * 1000) + 100 * 86_400_000)
        answer = stub.SendMessage(sv.SendMessageRequest(messages=[too_late]))
        assert answer.status.code == pb.Code.ILLEGAL_DELIVERY_TIME and "72 h" in answer.status.message
        system = stub.SendMessage(sv.SendMessageRequest(messages=[v2("rmq_sys_wheel_timer-broker-a")]))
        assert system.status.code == pb.Code.ILLEGAL_TOPIC and "system topic" in system.status.message
        for transaction_id in ("broker-a:999999", "nonsense", "broker-a:²"):
            ended = stub.EndTransaction(
                sv.EndTransactionRequest(
                    topic=pb.Resource(name="payments"),
                    message_id="01-bad",
                    transaction_id=transaction_id,
                    resolution=pb.TransactionResolution.COMMIT,
                )
            )
            assert ended.status.code == pb.Code.INVALID_TRANSACTION_ID, transaction_id
        assert stub.QueryRoute(sv.QueryRouteRequest(topic=pb.Resource(name="later"))).status.code == pb.Code.OK
