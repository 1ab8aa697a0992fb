"""Admission control on a real broker: past its in-flight budget it answers SYSTEM_BUSY at
once, and producers back off and retry within their send timeout; one that gives up says the
broker was busy, with its budget.

Nothing here depends on how fast the machine is. The broker's one admission slot is held by a
long poll that outlasts any test (``HOLD_MS``) and ends only when the test sends a message to
the polled queue (``Hold.release``): every check made while the slot is held runs while it is
held, by construction. Deadlines are generous bounds on waits, never measurements."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import closing
from dataclasses import dataclass

import pytest

from rocketspark import Admin, Consumer, LocalCluster, Message, Producer
from rocketspark.errors import SystemBusyError
from rocketspark.protocol.codes import RequestCode, ResponseCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.remoting.admission import SMALL_REQUEST_BYTES
from rocketspark.remoting.client import RemotingClient
from tests.helpers import eventually

pytestmark = pytest.mark.integration
HOLD_MS = 600_000  # the slot-holding long poll: longer than any test; Hold.release ends it
PADDING = {"padding": "p" * (SMALL_REQUEST_BYTES + 1)}  # a header field no shape declares: ignored
BIG = b"b" * (SMALL_REQUEST_BYTES + 1)  # small requests are never refused; these may be
WAIT_S = 60  # a generous bound on anything the tests wait for


@pytest.fixture
def one_slot_broker(make_cluster: Callable[..., LocalCluster]) -> Iterator[tuple[str, str]]:
    """A broker whose budget admits one request over SMALL_REQUEST_BYTES at a time (1 byte:
    each is admitted only alone), with topics "busy" (sends) and "idle" (a long poll)."""
    cluster = make_cluster(brokers=1, broker_config={"max_inflight_request_bytes": 1, "max_long_poll_ms": HOLD_MS})
    with Admin(cluster.nameserver) as admin:
        admin.create_topic("busy", queues=1)
        admin.create_topic("idle", queues=1)
    yield cluster.nameserver, cluster.brokers["broker-a"]


def padded_runtime_info() -> RemotingCommand:
    return RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO, PADDING)


@dataclass
class Hold:
    """The long poll holding the broker's only slot for requests over SMALL_REQUEST_BYTES."""

    poll: Future[RemotingCommand]
    nameserver: str

    def release(self) -> RemotingCommand:
        """End the long poll by giving it a message (a small send: admitted while the slot is
        held); return its answer, once the broker has let the slot go."""
        with Producer(self.nameserver) as producer:
            producer.send(Message("idle", b"wake up"))
        return self.poll.result(timeout=WAIT_S)


def hold_the_slot(client: RemotingClient, address: str, nameserver: str) -> Hold:
    """A long poll on the empty queue of "idle", padded so that it counts against the budget;
    returns once the broker holds it (a padded probe is refused). The probes follow it on the
    same stream, so none can take the slot before it."""
    pull = RemotingCommand.request(
        RequestCode.PULL_MESSAGE,
        {"topic": "idle", "queueId": 0, "queueOffset": 0, "suspendTimeoutMs": HOLD_MS, **PADDING},
    )
    poll = client.invoke_async(address, pull, HOLD_MS + 60_000)
    eventually(
        lambda: client.invoke(address, padded_runtime_info()).code == ResponseCode.SYSTEM_BUSY,
        timeout_s=WAIT_S,
        interval_s=0.01,
    )
    return Hold(poll, nameserver)


def test_a_request_past_the_budget_is_answered_busy_at_once_with_what_to_do(
    one_slot_broker: tuple[str, str],
) -> None:
    nameserver, address = one_slot_broker
    with closing(RemotingClient()) as client, Admin(nameserver) as admin:
        hold = hold_the_slot(client, address, nameserver)
        response = client.invoke(address, padded_runtime_info())
        assert not hold.poll.done()  # answered while the long poll still holds the slot: not queued behind it
        assert admin.broker_counters("broker-a")["inflightRequestBytes"] > SMALL_REQUEST_BYTES  # small: admitted
        # Each attempt may wait the whole send timeout: the send fails only by busy answers,
        # however slowly a loaded machine answers them.
        with Producer(nameserver, send_timeout_ms=3000, send_attempt_timeout_ms=3000) as impatient:
            impatient.publish_info("busy")  # the route is cached: the send timeout is spent on the broker
            with pytest.raises(SystemBusyError) as gave_up:
                impatient.send(Message("busy", BIG))  # it backs off and retries, but the slot stays taken
        assert not hold.poll.done()
        released = hold.release()
        counters = admin.broker_counters("broker-a")
    assert response.code == ResponseCode.SYSTEM_BUSY
    assert "broker broker-a is busy" in response.remark
    assert "budget of 1 bytes (max_inflight_request_bytes)" in response.remark
    assert "retry after a short backoff" in response.remark
    assert response.ext["limitBytes"] == 1 and response.ext["requestBytes"] > SMALL_REQUEST_BYTES
    assert response.ext["inflightBytes"] > SMALL_REQUEST_BYTES  # the long poll's

    message = gave_up.value.message  # the cause, with the broker and the budget; not a leftover's timeout
    assert message.startswith('send to topic "busy" gave up after ')
    assert f'broker "broker-a" ({gave_up.value.details["busyAnswers"]}) answered SYSTEM_BUSY' in message
    assert "in-flight request budget (max_inflight_request_bytes) is 1 bytes" in message
    assert "nothing of this send was stored" in message
    assert gave_up.value.details["broker"] == "broker-a" and gave_up.value.details["limitBytes"] == 1
    assert gave_up.value.details["busyAnswers"] >= 1

    assert released.code == ResponseCode.SUCCESS  # the long poll got the message that ended it
    assert counters["systemBusy"] >= 2 + gave_up.value.details["busyAnswers"]  # probes, this request, the sends
    assert counters["inflightRequestBytes"] < SMALL_REQUEST_BYTES  # the counters request itself, nothing left


def test_a_producer_backs_off_on_busy_and_its_send_succeeds_once_the_budget_has_room(
    one_slot_broker: tuple[str, str],
) -> None:
    nameserver, address = one_slot_broker
    with (
        closing(RemotingClient()) as client,
        Producer(nameserver, send_timeout_ms=WAIT_S * 2000) as producer,
        Admin(nameserver) as admin,
        ThreadPoolExecutor(1) as pool,
    ):
        producer.publish_info("busy")  # the route is cached: the send goes to the broker at once
        hold = hold_the_slot(client, address, nameserver)
        refused_before = admin.broker_counters("broker-a")["systemBusy"]
        sending = pool.submit(producer.send, Message("busy", BIG))
        eventually(  # refused, backed off and refused again: it keeps trying within its timeout
            lambda: admin.broker_counters("broker-a")["systemBusy"] >= refused_before + 2, timeout_s=WAIT_S
        )
        assert not sending.done()
        assert hold.release().code == ResponseCode.SUCCESS
        result = sending.result(timeout=WAIT_S)  # stored once the slot was free
    assert result.queue_offset == 0
    with Consumer(nameserver) as consumer:
        assert [m.body for m in consumer.pull("busy", 0, 0).messages] == [BIG]
