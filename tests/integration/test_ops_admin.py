"""The operator's look-ups against real broker processes (issue 13): messages by key through
the durable key index and by message id, consumer groups with members and lag, and an offset
reset that a running group consumer follows."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from rocketspark import Admin, GroupConsumer, LocalCluster, Message, Producer
from rocketspark.errors import InvalidParameterError, MessageNotFoundError, NoRouteInfoError, TopicNotExistError
from rocketspark.protocol.bodies import pack
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.types import MessageExt
from tests.helpers import eventually

pytestmark = pytest.mark.integration


def reset_request(group: str, topic: str, body: dict[str, object]) -> RemotingCommand:
    ext = {"consumerGroup": group, "topic": topic}
    return RemotingCommand.request(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, ext, body=pack(body))


def test_query_by_key_finds_messages_among_many_and_again_after_a_crash(
    make_cluster: Callable[..., LocalCluster],
) -> None:
    cluster = make_cluster(brokers=1)
    ns = cluster.nameserver
    with Admin(ns) as admin, Producer(ns) as producer:
        admin.create_topic("orders", 4)
        for start in range(0, 20_000, 1000):
            producer.send_batch(
                [
                    Message("orders", f"order {i}".encode(), keys=[f"k{i}", f"c{i % 7}"])
                    for i in range(start, start + 1000)
                ]
            )
        producer.send_batch([Message("orders", f"again {i}".encode(), keys="dup", queue_id=1) for i in range(3)])
        producer.send(Message("orders", b"no keys"))

        [found] = eventually(lambda: admin.query_messages("orders", "k12345"), timeout_s=20)
        assert found.body == b"order 12345" and found.keys == ["k12345", f"c{12345 % 7}"]
        dup = admin.query_messages("orders", "dup")
        assert [m.body for m in dup] == [b"again 2", b"again 1", b"again 0"]  # newest first
        assert len(admin.query_messages("orders", "c3", max_messages=50)) == 50
        assert admin.query_messages("orders", "nobody") == []
        assert admin.query_message_by_id(found.msg_id) == found

        cluster.kill_broker("broker-a")  # SIGKILL: the index is as durable as the log it follows
        cluster.start_broker("broker-a")
        [again] = eventually(lambda: admin.query_messages("orders", "k12345"), timeout_s=20)
        assert again == found
        assert [m.body for m in eventually(lambda: admin.query_messages("orders", "k19999"))] == [b"order 19999"]


def test_lookups_on_a_static_topic_give_logical_queues_and_offsets(make_cluster: Callable[..., LocalCluster]) -> None:
    cluster = make_cluster(brokers=2)
    ns = cluster.nameserver
    with Admin(ns) as admin, Producer(ns) as producer:
        admin.create_static_topic("events", 1, brokers=["broker-a"])
        producer.send(Message("events", b"before", keys="moved", queue_id=0))
        admin.remap_static_topic("events", [0], "broker-b")
        sent = producer.send(Message("events", b"after", keys="moved", queue_id=0))
        found = eventually(
            lambda: (
                admin.query_messages("events", "moved") if len(admin.query_messages("events", "moved")) == 2 else None
            )
        )
        assert [(m.body, m.queue_id, m.broker_name) for m in found] == [
            (b"after", 0, "broker-b"),
            (b"before", 0, "broker-a"),
        ]
        assert found[0].queue_offset == sent.queue_offset  # the logical offset, past the remap's gap
        assert admin.query_message_by_id(sent.msg_id).queue_offset == sent.queue_offset


def test_lookups_with_bad_input_say_what_is_wrong(make_cluster: Callable[..., LocalCluster]) -> None:
    cluster = make_cluster(brokers=1)
    with Admin(cluster.nameserver) as admin:
        admin.create_topic("orders", 1)
        with pytest.raises(TopicNotExistError):
            admin.query_messages("nosuch", "k1")
        with pytest.raises(InvalidParameterError, match="a message id is required"):
            admin.query_message_by_id(" ")
        with pytest.raises(MessageNotFoundError, match="no message has id not-an-id: no broker's key index knows it"):
            admin.query_message_by_id("not-an-id")  # a foreign client's id may be any string
        elsewhere = "0A000001" + "00002A9F" + "0" * 16  # an offset id of a broker at 10.0.0.1:10911
        with pytest.raises(MessageNotFoundError, match=r"names 10\.0\.0\.1:10911, which is no broker of this cluster"):
            admin.query_message_by_id(elsewhere)
        real = Producer(cluster.nameserver).send(Message("orders", b"x")).offset_msg_id
        moved = real[:16] + f"{int(real[16:], 16) + 5000:016X}"  # past the end of broker-a's log
        with pytest.raises(MessageNotFoundError, match=r"offset .* of broker broker-a .* no message is"):
            admin.query_message_by_id(moved)
        with pytest.raises(InvalidParameterError, match="exactly one of"):
            admin.reset_offset("g", "orders", earliest=True, latest=True)
        with pytest.raises(NoRouteInfoError, match="creates no topic"):
            admin.send_messages("nosuch", b"typo")  # a smoke test creates no topic
        assert "nosuch" not in admin.topics()
        with pytest.raises(InvalidParameterError, match=r"reset 5 .* not newer than reset 9"):
            for address in admin.brokers().values():
                admin.call(address, reset_request("g", "orders", {"version": 9, "offsets": {"0": 0}}))
                admin.call(address, reset_request("g", "orders", {"version": 5, "offsets": {"0": 0}}))


def test_smoke_test_send_and_consume_move_no_group(make_cluster: Callable[..., LocalCluster]) -> None:
    cluster = make_cluster(brokers=1)
    with Admin(cluster.nameserver) as admin:
        admin.create_topic("smoke", 2)
        sent = admin.send_messages("smoke", b"ping", count=3, tags="t", keys=["k"])
        assert [r.status.name for r in sent] == ["SEND_OK"] * 3
        read = admin.consume_messages("smoke", count=10, wait_s=0.5)
        assert sorted(m.body for m in read) == [b"ping 0", b"ping 1", b"ping 2"]
        assert {m.msg_id for m in read} == {r.msg_id for r in sent}
        assert len(admin.consume_messages("smoke", count=2)) == 2  # at most count
        assert admin.consume_messages("smoke", new=True, wait_s=0.3) == []
        assert admin.groups() == []  # nothing committed


def test_a_running_group_consumer_follows_a_reset_and_groups_show_members_and_lag(
    make_cluster: Callable[..., LocalCluster],
) -> None:
    cluster = make_cluster(brokers=1)
    ns = cluster.nameserver
    got: list[bytes] = []
    lock = threading.Lock()

    def handle(messages: list[MessageExt]) -> None:
        with lock:
            got.extend(m.body for m in messages)

    with Admin(ns) as admin, Producer(ns) as producer:
        admin.create_topic("billing", 2)
        producer.send_batch([Message("billing", f"old {i}".encode(), queue_id=i % 2) for i in range(10)])
        time.sleep(0.05)
        middle = int(time.time() * 1000)
        time.sleep(0.05)
        producer.send_batch([Message("billing", f"new {i}".encode(), queue_id=i % 2) for i in range(10)])
        group = GroupConsumer(ns, "invoices", "billing", handle, start_from="earliest", heartbeat_interval_ms=200)
        with group:
            eventually(lambda: len(got) == 20)
            shown = (("billing",), (group.client_id,), 0)  # committed: no lag
            eventually(
                lambda: [(g.topics, g.members, g.lag) for g in admin.groups() if g.group == "invoices"] == [shown]
            )

            with lock:
                got.clear()
            offsets = admin.reset_offset("invoices", "billing", timestamp_ms=middle)
            assert offsets == {0: 5, 1: 5}
            eventually(lambda: sorted(got) == sorted(f"new {i}".encode() for i in range(10)))
            with lock:
                got.clear()
            # an earlier reset by an admin whose clock ran an hour ahead of this one's: the
            # next reset must still be followed (its id goes above the planted one)
            ahead = {"version": time.time_ns() + 3600 * 10**9, "offsets": {"0": 10, "1": 10}}
            for address in admin.brokers().values():
                admin.call(address, reset_request("invoices", "billing", ahead))
            time.sleep(1)  # the members apply it (to where they are: nothing to read)
            cluster.kill_broker("broker-a")  # and the broker forgets it: resets are kept in memory
            cluster.start_broker("broker-a")
            time.sleep(1)  # the members heartbeat it again, saying which reset they applied
            assert got == []
            admin.reset_offset("invoices", "billing", earliest=True)
            eventually(lambda: len(got) == 20)
            time.sleep(0.5)
            assert len(got) == 20  # once each: the reset was applied once
        assert [g.lag for g in admin.groups() if g.group == "invoices"] == [0]
        admin.reset_offset("invoices", "billing", latest=True)
        assert admin.committed_offset("invoices", "billing", 0) == 10
