"""Admission control on a real broker: past its in-flight budget it answers SYSTEM_BUSY at
once, and producers back off and retry within their send timeout."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import closing

import pytest

from rocketspark import Admin, Consumer, LocalCluster, Message, Producer
from rocketspark.errors import SystemBusyError
from rocketspark.protocol.codes import RequestCode, ResponseCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.remoting.admission import SMALL_REQUEST_BYTES
from rocketspark.remoting.client import RemotingClient
from tests.helpers import eventually

pytestmark = pytest.mark.integration
HOLD_MS = 1500  # how long the long poll keeps the broker's only admission slot
PADDING = {"padding": "p" * (SMALL_REQUEST_BYTES + 1)}  # a header field no shape declares: ignored
BIG = b"b" * (SMALL_REQUEST_BYTES + 1)  # small requests are never refused; these may be


@pytest.fixture
def one_slot_broker(make_cluster: Callable[..., LocalCluster]) -> Iterator[tuple[str, str]]:
    """A broker whose budget admits one request over SMALL_REQUEST_BYTES at a time (1 byte:
    each is admitted only alone), with topics "busy" (sends) and "idle" (a long poll)."""
    cluster = make_cluster(brokers=1, broker_config={"max_inflight_request_bytes": 1})
    with Admin(cluster.nameserver) as admin:
        admin.create_topic("busy", queues=1)
        admin.create_topic("idle", queues=1)
    yield cluster.nameserver, cluster.brokers["broker-a"]


def padded_runtime_info() -> RemotingCommand:
    return RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO, PADDING)


def hold_the_slot(client: RemotingClient, address: str) -> Future[RemotingCommand]:
    """A long poll on the empty queue of "idle", padded so that it counts against the budget;
    returns once the broker holds it (a padded probe is refused). The probes follow it on the
    same stream, so none can take the slot before it."""
    pull = RemotingCommand.request(
        RequestCode.PULL_MESSAGE,
        {"topic": "idle", "queueId": 0, "queueOffset": 0, "suspendTimeoutMs": HOLD_MS, **PADDING},
    )
    held = client.invoke_async(address, pull, HOLD_MS + 5000)
    eventually(
        lambda: client.invoke(address, padded_runtime_info()).code == ResponseCode.SYSTEM_BUSY,
        timeout_s=5,
        interval_s=0.01,
    )
    return held


def test_a_request_past_the_budget_is_answered_busy_at_once_with_what_to_do(
    one_slot_broker: tuple[str, str],
) -> None:
    nameserver, address = one_slot_broker
    with closing(RemotingClient()) as client, Admin(nameserver) as admin:
        held = hold_the_slot(client, address)
        started = time.monotonic()
        response = client.invoke(address, padded_runtime_info())
        assert time.monotonic() - started < 0.5  # not queued behind the long poll
        assert admin.broker_counters("broker-a")["inflightRequestBytes"] > SMALL_REQUEST_BYTES  # small: admitted
        with Producer(nameserver, send_timeout_ms=300) as impatient, pytest.raises(SystemBusyError, match="is busy"):
            impatient.send(Message("busy", BIG))  # it backed off and retried, but the slot stayed taken
        assert held.result().code != ResponseCode.SYSTEM_BUSY
        counters = admin.broker_counters("broker-a")
    assert response.code == ResponseCode.SYSTEM_BUSY
    assert "broker broker-a is busy" in response.remark
    assert "budget of 1 bytes (max_inflight_request_bytes)" in response.remark
    assert "retry after a short backoff" in response.remark
    assert counters["systemBusy"] >= 3  # a probe, this request, the impatient producer's tries
    assert counters["inflightRequestBytes"] < SMALL_REQUEST_BYTES  # the counters request itself, nothing left


def test_a_producer_backs_off_on_busy_and_its_send_succeeds_once_the_budget_has_room(
    one_slot_broker: tuple[str, str],
) -> None:
    nameserver, address = one_slot_broker
    with closing(RemotingClient()) as client, Producer(nameserver, send_timeout_ms=5000) as producer:
        producer.publish_info("busy")  # the route is cached: the send goes to the broker at once
        held = hold_the_slot(client, address)
        started = time.monotonic()
        result = producer.send(Message("busy", BIG))
        elapsed = time.monotonic() - started
        assert held.result().code != ResponseCode.SYSTEM_BUSY
    assert result.queue_offset == 0
    assert 0.5 < elapsed < 5  # refused while the long poll held the slot (1.5 s), stored soon after it
    with Consumer(nameserver) as consumer:
        assert [m.body for m in consumer.pull("busy", 0, 0).messages] == [BIG]
    with Admin(nameserver) as admin:
        assert admin.broker_counters("broker-a")["systemBusy"] >= 2  # a probe and at least one send
