"""One id per message, on real processes (issue 27): the id a send returns is the one our
Consumer shows and ``admin query-msg --id`` (Admin and CLI) finds, and so is its offset id; the
official v2 client's ids are kept and found; a send without ids gets the broker's; a record
written before client ids still reads, under its offset id."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator

import pytest
from rocketmq import ClientConfiguration, Credentials, FilterExpression, SimpleConsumer
from rocketmq import Message as V2Message
from rocketmq import Producer as V2Producer

from broker.config import BrokerConfig
from broker.store.store import MessageStore
from rocketspark import Admin, Consumer, LocalCluster, Message, Producer
from rocketspark.codec import ids
from rocketspark.codec.build import encode_messages, tag_summary_of
from rocketspark.errors import MessageNotFoundError
from rocketspark.protocol.types import MessageExt
from tests.helpers import eventually
from tests.unit.test_find_by_id import version_2

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(brokers=2, processes=True, broker_config={"auto_create_topic_enable": False}) as c:
        with Admin(c.nameserver) as admin:
            admin.create_topic("orders", queues=2)
            admin.create_static_topic("events", 2)
        yield c


def everything(consumer: Consumer, topic: str) -> list[MessageExt]:
    return [m for q in range(len(consumer.queues(topic))) for m in consumer.pull(topic, q, 0, 10_000).messages]


def find(admin: Admin, msg_id: str) -> MessageExt:
    """``query_message_by_id``, once the key index has caught up with the log (about a second)."""
    return eventually(lambda: _found(admin, msg_id), timeout_s=15)


def _found(admin: Admin, msg_id: str) -> MessageExt | None:
    try:
        return admin.query_message_by_id(msg_id)
    except MessageNotFoundError:
        return None


def cli(nameserver: str, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "rocketspark.cli", "admin", "-n", nameserver, *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=60)


def test_a_sends_id_is_the_one_the_consumer_shows_and_query_msg_finds(cluster: LocalCluster) -> None:
    ns = cluster.nameserver
    with Producer(ns) as producer, Consumer(ns) as consumer, Admin(ns) as admin:
        one = producer.send(Message("orders", b"single", keys="k-single", queue_id=0))
        batch = producer.send_batch([Message("orders", f"b{i}".encode(), queue_id=1) for i in range(500)])[0]
        assert one.msg_id != one.offset_msg_id and len(one.msg_id) == 32 and len(one.offset_msg_id) == 32
        assert batch.count == 500 and batch.msg_ids()[0] == batch.msg_id
        first = int(batch.msg_id, 16)
        assert batch.msg_ids() == [f"{first + i:032X}" for i in range(500)]  # consecutive: the record holds the first

        stored = {m.body: m for m in everything(consumer, "orders")}
        assert stored[b"single"].msg_id == one.msg_id and stored[b"single"].offset_msg_id == one.offset_msg_id
        assert [stored[f"b{i}".encode()].msg_id for i in range(500)] == batch.msg_ids()
        assert stored[b"b0"].offset_msg_id == batch.offset_msg_id
        assert len({m.offset_msg_id for m in stored.values()}) == len(stored)

        assert find(admin, one.msg_id) == stored[b"single"]
        assert admin.query_message_by_id(one.offset_msg_id) == stored[b"single"]  # no index needed
        for i in (0, 1, 257, 499):
            message = stored[f"b{i}".encode()]
            assert find(admin, message.msg_id) == message
            assert admin.query_message_by_id(message.offset_msg_id) == message
        assert find(admin, batch.msg_ids()[3].lower()).body == b"b3"  # hex digits in either case

        for text in (one.msg_id, one.offset_msg_id):  # the CLI, both forms
            out = cli(ns, "query-msg", "--id", text)
            assert out.returncode == 0, out.stderr
            assert one.msg_id in out.stdout and "single" in out.stdout and "k-single" in out.stdout


def test_ids_on_a_static_topic_and_after_a_remap(cluster: LocalCluster) -> None:
    ns = cluster.nameserver
    with Producer(ns) as producer, Consumer(ns) as consumer, Admin(ns) as admin:
        before = producer.send(Message("events", b"before", queue_id=0))
        segment = admin.topic_status("events")[0].segments[-1].broker_name
        other = "broker-b" if segment == "broker-a" else "broker-a"
        admin.remap_static_topic("events", [0], other)
        after = producer.send(Message("events", b"after", queue_id=0))
        got = {m.body: m for m in consumer.pull("events", 0, 0, 100).messages}
        got.update({m.body: m for m in consumer.pull("events", 0, after.queue_offset, 100).messages})
        assert (got[b"before"].msg_id, got[b"after"].msg_id) == (before.msg_id, after.msg_id)
        assert (got[b"before"].broker_name, got[b"after"].broker_name) == (segment, other)
        host = bytes.fromhex(after.offset_msg_id)[:8]  # each offset id names the broker that stored it
        assert host == ids.store_host(cluster.brokers[other]) != bytes.fromhex(before.offset_msg_id)[:8]
        for sent in (before, after):
            assert find(admin, sent.msg_id).queue_offset == sent.queue_offset  # logical offsets
            assert admin.query_message_by_id(sent.offset_msg_id).queue_offset == sent.queue_offset


def test_a_record_sent_without_ids_gets_the_brokers(cluster: LocalCluster) -> None:
    ns = cluster.nameserver
    with Producer(ns) as producer, Consumer(ns) as consumer, Admin(ns) as admin:
        bare = encode_messages("orders", [Message("orders", f"bare{i}".encode()) for i in range(3)], first_id=ids.NO_ID)
        sent = producer.send_to_queue("orders", 2, bare)
        old = producer.send_to_queue("orders", 2, version_2(encode_messages("orders", [Message("orders", b"v2")])))
        assert sent.msg_id and sent.msg_ids()[2] == f"{int(sent.msg_id, 16) + 2:032X}"
        assert old.msg_id and old.msg_id != sent.msg_id
        got = {m.body: m for m in consumer.pull("orders", 2, 0, 100).messages}
        assert [got[f"bare{i}".encode()].msg_id for i in range(3)] == sent.msg_ids()
        assert got[b"v2"].msg_id == old.msg_id and got[b"v2"].client_id == old.msg_id  # stored as version 3
        assert find(admin, sent.msg_ids()[1]).body == b"bare1"


def test_the_official_clients_ids_are_kept_found_and_ours_reach_its_consumers(cluster: LocalCluster) -> None:
    ns = cluster.nameserver
    v2 = V2Producer(ClientConfiguration(cluster.grpc_endpoint, Credentials()), ("orders",))
    v2.startup()
    try:
        message = V2Message()
        message.topic, message.body, message.tag = "orders", b"from v2", "V2"
        v2_id = v2.send(message).message_id
    finally:
        v2.shutdown()
    with Consumer(ns) as consumer, Admin(ns) as admin, Producer(ns) as producer:
        [stored] = [m for m in everything(consumer, "orders") if m.body == b"from v2"]
        assert stored.msg_id == v2_id == stored.client_id and stored.msg_id != stored.offset_msg_id
        assert find(admin, v2_id) == stored  # its own UNIQ_KEY, indexed message by message
        assert admin.query_message_by_id(stored.offset_msg_id) == stored
        ours = producer.send_batch([Message("orders", f"to v2 {i}".encode(), tags="OURS") for i in range(5)])
    sent = {i for r in ours for i in r.msg_ids()}
    receiver = SimpleConsumer(
        ClientConfiguration(cluster.grpc_endpoint, Credentials()),
        "g-ids",
        {"orders": FilterExpression("OURS")},
        await_duration=2,
    )
    receiver.startup()
    try:
        got: list[object] = []
        deadline = time.monotonic() + 20
        while len(got) < 5 and time.monotonic() < deadline:
            got += receiver.receive(16, 20)
        assert {m.message_id for m in got} == sent  # type: ignore[attr-defined]
        for m in got:
            receiver.ack(m)
    finally:
        receiver.shutdown()


def test_a_record_written_before_client_ids_still_reads_under_its_offset_id(
    make_cluster: Callable[..., LocalCluster],
) -> None:
    cluster = make_cluster(brokers=1)
    ns = cluster.nameserver
    with Admin(ns) as admin, Producer(ns) as producer:
        admin.create_topic("legacy", 1)
        new = producer.send(Message("legacy", b"new one"))
    values = cluster.broker_values("broker-a")
    cluster.stop_broker("broker-a")
    store = MessageStore(BrokerConfig(**values).store_config())  # the log as an older broker left it:
    store.open()  # a version-2 record after the new one
    record = version_2(encode_messages("legacy", [Message("legacy", b"old one", keys="old")]))
    store.put("legacy", 0, record, 1, tag_summary_of(record))
    store.close()
    cluster.start_broker("broker-a")
    with Consumer(ns) as consumer, Admin(ns) as admin:
        got = {m.body: m for m in consumer.pull("legacy", 0, 0, 10).messages}
        old = got[b"old one"]
        assert old.client_id is None and old.msg_id == old.offset_msg_id  # RocketMQ's getMsgId without UNIQ_KEY
        assert got[b"new one"].msg_id == new.msg_id
        assert admin.query_message_by_id(old.msg_id) == old
        assert eventually(lambda: admin.query_messages("legacy", "old"), timeout_s=15) == [old]
        results = consumer.iter_range("legacy", 0, 0, columnar=True)
        shown = [i for r in results if r.batch is not None for i in r.batch.column("msgId").to_pylist()]
        assert shown == [new.msg_id, old.msg_id]
