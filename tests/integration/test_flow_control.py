"""Admission control on a real broker: past its in-flight budget it answers SYSTEM_BUSY at
once, and producers back off and retry within their send timeout."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import closing

import pytest

from rocketspark import Admin, Consumer, LocalCluster, Message, Producer
from rocketspark.errors import SystemBusyError
from rocketspark.protocol.codes import RequestCode, ResponseCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.types import PullStatus
from rocketspark.remoting.client import RemotingClient
from tests.helpers import eventually

pytestmark = pytest.mark.integration
HOLD_MS = 1500  # how long the long poll keeps the broker's only admission slot


@pytest.fixture
def one_slot_broker(make_cluster: Callable[..., LocalCluster]) -> Iterator[tuple[str, str]]:
    """A broker whose budget admits one request at a time (1 byte: each request is admitted
    only alone), with topics "busy" (sends) and "idle" (a long poll that holds the slot)."""
    cluster = make_cluster(brokers=1, broker_config={"max_inflight_request_bytes": 1})
    with Admin(cluster.nameserver) as admin:
        admin.create_topic("busy", queues=1)
        admin.create_topic("idle", queues=1)
    yield cluster.nameserver, cluster.brokers["broker-a"]


def hold_the_slot(nameserver: str, address: str) -> threading.Thread:
    """Start a long poll on the empty queue of "idle" and return once the broker has it in
    flight (a probe request is refused)."""

    def poll() -> None:
        with Consumer(nameserver) as consumer:
            assert consumer.pull("idle", 0, 0, long_poll_ms=HOLD_MS).status is PullStatus.NO_NEW_MSG

    holder = threading.Thread(target=poll)
    holder.start()
    with closing(RemotingClient()) as client:
        probe = RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO)
        eventually(lambda: client.invoke(address, probe).code == ResponseCode.SYSTEM_BUSY, timeout_s=5, interval_s=0.01)
    return holder


def test_a_request_past_the_budget_is_answered_busy_at_once_with_what_to_do(
    one_slot_broker: tuple[str, str],
) -> None:
    nameserver, address = one_slot_broker
    holder = hold_the_slot(nameserver, address)
    with closing(RemotingClient()) as client:
        started = time.monotonic()
        response = client.invoke(address, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO))
        assert time.monotonic() - started < 0.5  # not queued behind the long poll
    assert response.code == ResponseCode.SYSTEM_BUSY
    assert "broker broker-a is busy" in response.remark
    assert "budget of 1 bytes (max_inflight_request_bytes)" in response.remark
    assert "retry after a short backoff" in response.remark
    with Producer(nameserver, send_timeout_ms=300) as impatient, pytest.raises(SystemBusyError, match="is busy"):
        impatient.send(Message("busy", b"too soon"))  # it backed off and retried, but the slot stayed taken
    holder.join()
    with Admin(nameserver) as admin:
        counters = admin.broker_counters("broker-a")
    assert counters["systemBusy"] >= 3  # the probe, this request, the impatient producer's tries
    assert counters["inflightRequestBytes"] > 0  # the counters request itself, nothing left behind


def test_a_producer_backs_off_on_busy_and_its_send_succeeds_once_the_budget_has_room(
    one_slot_broker: tuple[str, str],
) -> None:
    nameserver, address = one_slot_broker
    with Producer(nameserver, send_timeout_ms=5000) as producer:
        producer.publish_info("busy")  # the route is cached: the send goes to the broker at once
        holder = hold_the_slot(nameserver, address)
        started = time.monotonic()
        result = producer.send(Message("busy", b"patient"))
        elapsed = time.monotonic() - started
    holder.join()
    assert result.queue_offset == 0
    assert 0.3 < elapsed < 5  # refused while the long poll held the slot, stored right after it
    with Consumer(nameserver) as consumer:
        assert [m.body for m in consumer.pull("busy", 0, 0).messages] == [b"patient"]
    with Admin(nameserver) as admin:
        assert admin.broker_counters("broker-a")["systemBusy"] >= 2  # the probe and at least one send
