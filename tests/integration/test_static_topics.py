"""Static topics on real broker processes: seed 003's migration scenarios, one test each.

After every step: each message produced is read back exactly once per logical queue, in send
order; logical offsets strictly increase; the number of logical queues never changes; and
``topic_status`` shows the expected segments and states.
"""

from __future__ import annotations

import threading
import time
import zlib
from collections.abc import Callable
from typing import NamedTuple

import pytest

from rocketspark import Admin, Consumer, LocalCluster, Message, Producer
from rocketspark.client.admin import QueueStatus
from tests.helpers import eventually

pytestmark = [pytest.mark.integration, pytest.mark.slow]

QUEUES = 4
# Tiny commit-log segments and a one-second retention, so that a sealed segment can expire
# within a test. Cleanup of expired segments runs often.
EXPIRING = {
    "segment_bytes": 64 * 1024,
    "max_message_bytes": 16 * 1024,
    "retention_hours": 1.0 / 3600,
    "retention_check_interval_ms": 200,
    "mapping_clean_interval_ms": 200,
}


class Ledger:
    """What was acknowledged, per logical queue, in send order."""

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.sent: dict[int, list[tuple[int, bytes]]] = {q: [] for q in range(QUEUES)}
        self.seq = 0

    def produce(self, producer: Producer, rounds: int) -> None:
        for _ in range(rounds):
            for q in range(QUEUES):
                body = f"{q}:{self.seq}".encode()
                self.seq += 1
                result = producer.send(Message(self.topic, body, queue_id=q))
                assert result.queue_id == q
                self.sent[q].append((result.queue_offset, body))

    def forget_before(self, q: int, offset: int) -> None:
        self.sent[q] = [(o, b) for o, b in self.sent[q] if o >= offset]


def read_all(consumer: Consumer, topic: str, q: int) -> list[tuple[int, bytes]]:
    start = consumer.min_offset(topic, q)
    return [(m.queue_offset, m.body) for r in consumer.iter_range(topic, q, start) for m in r.messages]


def check(ns: str, ledger: Ledger) -> list[QueueStatus]:
    with Consumer(ns) as consumer:
        assert len(consumer.queues(ledger.topic)) == QUEUES
        for q in range(QUEUES):
            got = read_all(consumer, ledger.topic, q)
            offsets = [o for o, _ in got]
            assert offsets == sorted(set(offsets)), f"queue {q}: offsets not strictly increasing"
            assert got == ledger.sent[q], f"queue {q}: read back differs from what was acknowledged"
    with Admin(ns) as admin:
        status = admin.topic_status(ledger.topic)
    assert [s.queue_id for s in status] == list(range(QUEUES))
    return status


def layout(status: list[QueueStatus], q: int) -> list[tuple[str, str]]:
    return [(s.broker_name, s.state.value) for s in status[q].segments]


class Scenario(NamedTuple):
    cluster: LocalCluster
    ns: str
    topic: str
    ledger: Ledger


@pytest.fixture
def static_topic(make_cluster: Callable[..., LocalCluster]) -> Callable[..., Scenario]:
    """Start the scenario every test here begins with: two brokers with the given broker
    config, a static topic of QUEUES logical queues spread over them (queues 0, 2 on
    broker-a; 1, 3 on broker-b) and an empty ledger."""

    def make(topic: str, **config: object) -> Scenario:
        cluster = make_cluster(brokers=2, broker_config=dict(config))
        with Admin(cluster.nameserver) as admin:
            admin.create_static_topic(topic, QUEUES, brokers=["broker-a", "broker-b"])
        return Scenario(cluster, cluster.nameserver, topic, Ledger(topic))

    return make


def test_migrate_a_queue_while_messages_are_produced(static_topic: Callable[..., Scenario]) -> None:
    _, ns, topic, ledger = static_topic("migrate-live")  # queues 0, 2 on broker-a; 1, 3 on broker-b
    stop = threading.Event()
    errors: list[BaseException] = []

    def produce() -> None:
        with Producer(ns) as producer:
            while not stop.is_set():
                try:
                    ledger.produce(producer, 1)
                except BaseException as exc:
                    errors.append(exc)
                    return

    worker = threading.Thread(target=produce)
    worker.start()
    eventually(lambda: ledger.seq > 200, timeout_s=30)
    with Admin(ns) as admin:
        result = admin.remap_static_topic(topic, [0], "broker-b")
    eventually(lambda: len(ledger.sent[0]) > 120, timeout_s=30)
    stop.set()
    worker.join(30)
    assert not errors, errors

    before = [o for o, _ in ledger.sent[0] if o < 10_000]
    after = [o for o, _ in ledger.sent[0] if o >= 10_000]
    assert 0 < len(before) < 5_000 and before == list(range(len(before)))
    # The new segment opens at the next 10,000 block at least half a block past the old end.
    assert result.moved == [(0, "broker-a", "broker-b", 10_000)]
    assert after == list(range(10_000, 10_000 + len(after))) and after  # dense after the gap, never reused
    status = check(ns, ledger)
    assert layout(status, 0) == [("broker-a", "ReadOnly"), ("broker-b", "Normal")]
    assert status[0].segments[0].logical_end == before[-1] + 1
    assert layout(status, 1) == [("broker-b", "Normal")]


def test_let_the_old_segment_expire(static_topic: Callable[..., Scenario]) -> None:
    cluster, ns, topic, ledger = static_topic("expire", **EXPIRING)
    with Producer(ns) as producer:
        ledger.produce(producer, 20)
        with Admin(ns) as admin:
            admin.remap_static_topic(topic, [0], "broker-b")
        check(ns, ledger)
        ledger.produce(producer, 20)
        _roll_and_age(producer, cluster)  # push broker-a's old segment data out of retention

    def expired_then_dropped() -> bool:
        with Admin(ns) as admin:
            return layout(admin.topic_status(topic), 0) == [("broker-b", "Normal")]

    eventually(expired_then_dropped, timeout_s=30)
    ledger.forget_before(0, 10_000)  # what lived in the dropped segment is gone, as retention intends
    ledger.forget_before(2, 10**9)  # queue 2 stayed on broker-a, whose old log expired as well
    status = check(ns, ledger)
    assert status[0].min_offset == 10_000


def _roll_and_age(producer: Producer, cluster: LocalCluster) -> None:
    """Fill enough log on broker-a that its early segments are sealed, then let them age."""
    with Admin(cluster.nameserver) as admin:
        admin.create_topic("filler", queues=1, brokers=["broker-a"])
    for _ in range(12):
        producer.send(Message("filler", b"f" * 12_000))
    time.sleep(1.5)
    producer.send(Message("filler", b"f" * 12_000))


def test_migrate_back_to_the_first_broker_before_the_old_segment_expired(
    static_topic: Callable[..., Scenario],
) -> None:
    _, ns, topic, ledger = static_topic("back-early")
    with Producer(ns) as producer, Admin(ns) as admin:
        ledger.produce(producer, 10)
        admin.remap_static_topic(topic, [0], "broker-b")
        ledger.produce(producer, 10)
        admin.remap_static_topic(topic, [0], "broker-a")
        ledger.produce(producer, 10)
    status = check(ns, ledger)
    assert layout(status, 0) == [("broker-a", "ReadOnly"), ("broker-b", "ReadOnly"), ("broker-a", "Normal")]
    first, _, back = status[0].segments
    assert back.queue_id != first.queue_id  # a physical queue is never reused
    assert [s.logical_start for s in status[0].segments] == [0, 10_000, 20_000]


def test_migrate_back_to_the_first_broker_after_the_old_segment_expired(
    static_topic: Callable[..., Scenario],
) -> None:
    cluster, ns, topic, ledger = static_topic("back-late", **EXPIRING)
    with Producer(ns) as producer, Admin(ns) as admin:
        ledger.produce(producer, 10)
        admin.remap_static_topic(topic, [0], "broker-b")
        ledger.produce(producer, 10)
        _roll_and_age(producer, cluster)
        eventually(lambda: layout(admin.topic_status(topic), 0) == [("broker-b", "Normal")], timeout_s=30)
        ledger.forget_before(0, 10_000)
        ledger.forget_before(2, 10**9)
        admin.remap_static_topic(topic, [0], "broker-a")
        ledger.produce(producer, 10)
    status = check(ns, ledger)
    assert layout(status, 0) == [("broker-b", "ReadOnly"), ("broker-a", "Normal")]
    assert status[0].segments[-1].queue_id >= 2  # a new physical queue, not the expired one


def test_take_a_broker_offline_by_draining_it(static_topic: Callable[..., Scenario]) -> None:
    _, ns, _, ledger = static_topic("drain")
    with Producer(ns) as producer, Admin(ns) as admin:
        ledger.produce(producer, 10)
        results = admin.drain_broker("broker-b")
        assert sorted(q for r in results for q, *_ in r.moved) == [1, 3]
        ledger.produce(producer, 10)
        assert admin.broker_runtime("broker-b")["perm"] == "R--"
    status = check(ns, ledger)
    for q in (1, 3):
        assert layout(status, q) == [("broker-b", "ReadOnly"), ("broker-a", "Normal")]
    assert all(s.segments[-1].broker_name == "broker-a" for s in status)


def test_add_a_new_broker_and_move_some_queues_to_it(static_topic: Callable[..., Scenario]) -> None:
    cluster, ns, topic, ledger = static_topic("scale-out")
    with Producer(ns) as producer:
        ledger.produce(producer, 10)
        cluster.start_broker("broker-c")
        with Admin(ns) as admin:
            admin.remap_static_topic(topic, [2, 3], "broker-c")
        ledger.produce(producer, 10)
    status = check(ns, ledger)
    assert layout(status, 2) == [("broker-a", "ReadOnly"), ("broker-c", "Normal")]
    assert layout(status, 3) == [("broker-b", "ReadOnly"), ("broker-c", "Normal")]
    assert layout(status, 0) == [("broker-a", "Normal")]


def test_a_killed_broker_holding_a_sealed_segment_serves_it_after_restart(
    static_topic: Callable[..., Scenario],
) -> None:
    cluster, ns, topic, ledger = static_topic("crash")
    with Producer(ns) as producer, Admin(ns) as admin:
        ledger.produce(producer, 10)
        admin.remap_static_topic(topic, [0, 2], "broker-b")  # broker-a now holds only sealed segments
        ledger.produce(producer, 10)
    cluster.kill_broker("broker-a")
    cluster.start_broker("broker-a")
    status = check(ns, ledger)
    assert layout(status, 0) == [("broker-a", "ReadOnly"), ("broker-b", "Normal")]


def test_keys_keep_their_queue_across_a_move_and_follow_hash_mod_n_after_raising_it(
    static_topic: Callable[..., Scenario],
) -> None:
    _, ns, topic, _ = static_topic("raise")
    keys = [f"user-{i}" for i in range(16)]
    expected: dict[int, list[bytes]] = {q: [] for q in range(6)}

    def send_keyed(producer: Producer, label: str, queues: int) -> None:
        for key in keys:
            body = f"{label}:{key}".encode()
            logical = (
                zlib.crc32(key.encode()) % queues
            )  # what the docs promise (docs/client/static-topics.md): hash(key) % N
            assert producer.send(Message(topic, body, sharding_key=key)).queue_id == logical, key
            expected[logical].append(body)

    with Producer(ns) as producer, Admin(ns) as admin:
        send_keyed(producer, "before", QUEUES)
        admin.remap_static_topic(topic, [0, 2], "broker-b")  # the producer's cached mapping is now stale
        send_keyed(producer, "moved", QUEUES)  # same key, same logical queue, on its new broker
        result = admin.remap_static_topic(topic, total_queues=6)
        assert [q for q, _ in result.added] == [4, 5]
        assert len(admin.topic_status(topic)) == 6
        # N itself changed, so keys spread over 6 queues once the producer has the new route
        # (pushed to it within about a second).
        eventually(lambda: producer.queue_count(topic) == 6, timeout_s=5)
        send_keyed(producer, "raised", 6)
        for q in range(6):
            assert producer.send(Message(topic, b"y", queue_id=q)).queue_id == q
    with Consumer(ns) as consumer:
        for q in range(6):
            stored = [body for _, body in read_all(consumer, topic, q) if body != b"y"]
            assert stored == expected[q], f"logical queue {q} holds other keyed messages than were routed to it"
    assert {q for q in range(QUEUES) if expected[q]} == set(range(QUEUES))  # the keys did cover every queue


def test_bad_static_topic_requests_get_clear_errors(static_topic: Callable[..., Scenario]) -> None:
    from rocketspark.codec.build import encode_messages
    from rocketspark.errors import (
        BrokerNotExistError,
        InvalidParameterError,
        NotLeaderForQueueError,
        TopicExistAlreadyError,
    )
    from rocketspark.protocol.codes import RequestCode
    from rocketspark.protocol.command import RemotingCommand
    from rocketspark.remoting.client import RemotingClient, check

    cluster, ns, topic, _ = static_topic("strict")
    with Admin(ns) as admin:
        with pytest.raises(BrokerNotExistError, match=r"unknown broker.*broker-z"):
            admin.remap_static_topic(topic, [0], "broker-z")
        with pytest.raises(InvalidParameterError, match=r"logical queue\(s\) 9 out of range: strict has queues 0-3"):
            admin.remap_static_topic(topic, [9], "broker-b")
        with pytest.raises(
            InvalidParameterError, match="cannot lower the queue count of static topic strict from 4 to 2"
        ):
            admin.remap_static_topic(topic, total_queues=2)
        admin.create_topic("plain", queues=2)
        with pytest.raises(TopicExistAlreadyError, match='"plain" is already a normal topic'):
            admin.create_static_topic("plain", 4)
        with pytest.raises(TopicExistAlreadyError, match="already exists with 4 logical queues"):
            admin.create_static_topic(topic, 8)
        old_epoch = admin.topic_route(topic).mapping.epoch  # type: ignore[union-attr]
        admin.remap_static_topic(topic, [0], "broker-b")
    with Consumer(ns) as consumer, pytest.raises(InvalidParameterError, match="queue 7 does not exist"):
        consumer.pull(topic, 7, 0)

    # A request built from the outdated mapping: queue 0 used to live on broker-a.
    stale = RemotingCommand.request(
        RequestCode.SEND_MESSAGE,
        {"topic": topic, "logicQueueId": 0, "epoch": old_epoch},
        encode_messages(topic, [Message(topic, b"stale")]),
    )
    client = RemotingClient()
    try:
        with pytest.raises(NotLeaderForQueueError) as info:
            check(client.invoke(cluster.brokers["broker-a"], stale))
    finally:
        client.close()
    assert f"request epoch {old_epoch}, broker epoch" in str(info.value) and "refresh the route" in str(info.value)

    with Producer(ns) as producer:  # a client corrects itself: it re-reads the route and resends
        assert producer.send(Message(topic, b"fresh", queue_id=0)).broker_name == "broker-b"


def test_a_consumer_with_a_stale_mapping_is_corrected_not_misled(static_topic: Callable[..., Scenario]) -> None:
    from rocketspark.client.pulling import PullPlan, plan_pull
    from rocketspark.protocol.codes import ResponseCode
    from rocketspark.protocol.types import PullResult
    from rocketspark.remoting.client import RemotingClient

    cluster, ns, topic, _ = static_topic("stale-reader")
    # No push and no refresh: the consumer's mapping stays the old one until a broker says so.
    stale_consumer = Consumer(ns, route_push=False, poll_interval_ms=3_600_000)

    def planned(consumer: Consumer, offset: int) -> PullPlan | PullResult:
        """What the consumer's pull at ``offset`` sends (or answers without sending), from the
        mapping it holds."""
        return plan_pull(consumer.queue(topic, 0), offset, 100, timeout_ms=consumer.timeout_ms)

    with Producer(ns) as producer, stale_consumer as consumer:
        for i in range(5):
            producer.send(Message(topic, f"old-{i}".encode(), queue_id=0))
        assert [m.queue_offset for m in consumer.pull(topic, 0, 0, 100).messages] == [0, 1, 2, 3, 4]
        assert consumer.queues(topic)[0].leader is not None  # cached: segment on broker-a, open
        consumer.commit_offset("g", topic, 0, 5)  # kept by broker-a, the leader now
        with Admin(ns) as admin:
            admin.remap_static_topic(topic, [0], "broker-b")
        for i in range(3):
            producer.send(Message(topic, f"new-{i}".encode(), queue_id=0))
        # The consumer still holds the old mapping, so its pull goes to broker-a, which refuses
        # to read past the seal: MAPPING_STALE (not NOT_LEADER, not an empty read).
        stale = planned(consumer, 5)
        assert isinstance(stale, PullPlan) and stale.address == cluster.brokers["broker-a"]
        raw = RemotingClient()
        try:
            assert raw.invoke(stale.address, stale.request).code == ResponseCode.MAPPING_STALE
        finally:
            raw.close()
        # Told so, the consumer re-reads the route (once) and continues in the new segment; the
        # retry plans the gap without asking anyone.
        queries = consumer.routes.counters.queries
        gap = consumer.pull(topic, 0, 5, 100)
        assert gap.messages == [] and gap.next_offset == 10_000
        assert consumer.routes.counters.queries == queries + 1
        assert isinstance(planned(consumer, 5), PullResult)
        tail = consumer.pull(topic, 0, gap.next_offset, 100)
        assert [(m.queue_offset, m.body) for m in tail.messages] == [
            (10_000 + i, f"new-{i}".encode()) for i in range(3)
        ]
        assert consumer.committed_offset("g", topic, 0) == 5  # logical progress survives the remap
        assert consumer.committed_offset("other-group", topic, 0) is None
        consumer.commit_offset("g", topic, 0, 10_003)
        assert consumer.committed_offset("g", topic, 0) == 10_003
