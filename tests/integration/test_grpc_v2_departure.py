"""A consumer's death or shutdown releases what it held: the official RocketMQ 5 consumers
(rocketmq-python-client) against our v2 endpoint, in real processes. Messages a consumer
received and never acknowledged go to the group's other consumers within seconds, not at the
end of their invisible time (60 s here), counted as a new delivery attempt."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import grpc
import pytest
from rocketmq import ClientConfiguration, Credentials, FilterExpression, Producer, SimpleConsumer
from rocketmq import Message as V2Message

from rocketspark import Admin, LocalCluster
from rocketspark.grpcv2.stubs import definition_pb2 as pb
from rocketspark.grpcv2.stubs import service_pb2 as sv
from rocketspark.grpcv2.stubs import service_pb2_grpc as sv_grpc

pytestmark = pytest.mark.integration

INVISIBLE_S = 60  # what the consumers hold messages for (a PushConsumer's default too)
WITHIN_S = 15.0  # how soon the other consumer must have them: well under INVISIBLE_S

# An official PushConsumer whose listener never returns: what it received stays unacknowledged
# (the one in the listener and those it fetched ahead) until the process is killed.
STUCK_PUSH_CONSUMER = """
import sys, threading
from rocketmq import ClientConfiguration, ConsumeResult, Credentials, FilterExpression, MessageListener, PushConsumer

endpoint, group, topic = sys.argv[1:4]
said = threading.Lock()  # the listener runs in several threads: one line at a time

class Stuck(MessageListener):
    def consume(self, message):
        with said:
            print("consuming", message.message_id, flush=True)
        threading.Event().wait()
        return ConsumeResult.SUCCESS

consumer = PushConsumer(ClientConfiguration(endpoint, Credentials()), group, Stuck(), {topic: FilterExpression()})
consumer.startup()
threading.Event().wait()
"""


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(brokers=2, processes=True, broker_config={"auto_create_topic_enable": False}) as c:
        with Admin(c.nameserver) as admin:
            for topic in ("killed", "closed", "raw-departing"):
                admin.create_topic(topic, queues=2)  # 4 queues, over both brokers
        yield c


def send(cluster: LocalCluster, topic: str, count: int) -> list[str]:
    producer = Producer(ClientConfiguration(cluster.grpc_endpoint, Credentials()), (topic,))
    producer.startup()
    try:
        ids = []
        for i in range(count):
            message = V2Message()
            message.topic, message.body = topic, f"{topic}-{i}".encode()
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


def take_over(cluster: LocalCluster, group: str, topic: str, ids: list[str]) -> tuple[dict[str, int], float]:
    """Every message of ``ids`` as another consumer of ``group`` receives it (acknowledged), with
    its delivery attempt; and how long that took."""
    started = time.monotonic()
    attempts: dict[str, int] = {}
    consumer = simple_consumer(cluster, group, topic)
    try:
        while set(attempts) != set(ids) and time.monotonic() - started < INVISIBLE_S + 10:
            for message in consumer.receive(16, INVISIBLE_S):
                attempts[message.message_id] = message.delivery_attempt
                consumer.ack(message)
    finally:
        consumer.shutdown()
    return attempts, time.monotonic() - started


def test_a_killed_push_consumers_unacknowledged_messages_go_to_another_consumer_within_seconds(
    cluster: LocalCluster,
) -> None:
    ids = send(cluster, "killed", 40)
    child = subprocess.Popen(
        [sys.executable, "-c", STUCK_PUSH_CONSUMER, cluster.grpc_endpoint, "g-killed", "killed"],
        stdout=subprocess.PIPE,
        text=True,
        env=os.environ | {"PYTHONUNBUFFERED": "1"},
    )
    try:
        lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda: [lines.put(line) for line in child.stdout or ()], daemon=True).start()
        first = lines.get(timeout=60).split()  # its listener has one: received, never acknowledged
        assert first[0] == "consuming" and first[1] in ids
        time.sleep(1.0)  # and it fetches ahead meanwhile
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    attempts, took = take_over(cluster, "g-killed", "killed", ids)
    assert set(attempts) == set(ids)
    assert took < WITHIN_S, f"the killed consumer's messages came back after {took:.1f} s"
    assert attempts[first[1]] == 2  # its second delivery
    held = [i for i, attempt in attempts.items() if attempt > 1]
    assert len(held) > 1, "the consumer fetched only the message it was stuck on"


def test_a_consumer_that_shuts_down_without_acknowledging_hands_its_messages_back(cluster: LocalCluster) -> None:
    ids = send(cluster, "closed", 10)
    leaving = simple_consumer(cluster, "g-closed", "closed")
    got: list[str] = []
    deadline = time.monotonic() + 20
    while len(got) < len(ids) and time.monotonic() < deadline:
        got += [m.message_id for m in leaving.receive(16, INVISIBLE_S)]
    assert sorted(got) == sorted(ids)
    leaving.shutdown()  # NotifyClientTermination, then its Telemetry stream ends
    attempts, took = take_over(cluster, "g-closed", "closed", ids)
    assert took < WITHIN_S, f"the closed consumer's messages came back after {took:.1f} s"
    assert attempts == {i: 2 for i in ids}


class Stream:
    """A raw Telemetry stream as client ``client`` opens it, kept open until ``close``."""

    def __init__(self, stub: sv_grpc.MessagingServiceStub, client: str) -> None:
        self.outbox: queue.Queue[sv.TelemetryCommand | None] = queue.Queue()
        settings = pb.Settings(client_type=pb.ClientType.SIMPLE_CONSUMER)
        settings.subscription.group.name = "g-raw"
        self.outbox.put(sv.TelemetryCommand(settings=settings))
        self.responses = stub.Telemetry(iter(self.outbox.get, None), metadata=(("x-mq-client-id", client),))
        assert next(self.responses).status.code == pb.Code.OK  # the endpoint has it open

    def close(self) -> None:
        self.outbox.put(None)
        self.responses.cancel()


def receive(stub: sv_grpc.MessagingServiceStub, client: str, wait_s: int) -> list[pb.Message]:
    request = sv.ReceiveMessageRequest(
        group=pb.Resource(name="g-raw"),
        message_queue=pb.MessageQueue(topic=pb.Resource(name="raw-departing")),
        batch_size=16,
    )
    request.invisible_duration.FromSeconds(INVISIBLE_S)
    request.long_polling_timeout.FromSeconds(wait_s)
    frames = stub.ReceiveMessage(request, metadata=(("x-mq-client-id", client),), timeout=wait_s + 10)
    return [frame.message for frame in frames if frame.HasField("message")]


def test_a_re_opened_stream_keeps_the_messages_and_a_termination_releases_them_at_once(
    cluster: LocalCluster,
) -> None:
    [sent] = send(cluster, "raw-departing", 1)
    with grpc.insecure_channel(cluster.grpc_endpoint) as channel:
        stub = sv_grpc.MessagingServiceStub(channel)
        first = Stream(stub, "raw-1")
        deadline = time.monotonic() + 20
        held: list[pb.Message] = []
        while not held and time.monotonic() < deadline:
            held = receive(stub, "raw-1", 2)
        assert [m.system_properties.message_id for m in held] == [sent]
        second = Stream(stub, "raw-1")  # the client rebuilds its stream: the new one, then the old one ends
        first.close()
        try:
            assert receive(stub, "raw-2", 5) == []  # more than the grace after the old stream's end: still held
            for group in ("g-elsewhere", "g-raw"):  # the first ends it in a group where it holds nothing
                terminated = stub.NotifyClientTermination(
                    sv.NotifyClientTerminationRequest(group=pb.Resource(name=group)),
                    metadata=(("x-mq-client-id", "raw-1"),),
                )
                assert terminated.status.code == pb.Code.OK
                if group == "g-elsewhere":
                    assert receive(stub, "raw-2", 2) == []
            [again] = receive(stub, "raw-2", 5)  # its stream still open: the termination released it
        finally:
            second.close()
    assert again.system_properties.message_id == sent and again.system_properties.delivery_attempt == 2
