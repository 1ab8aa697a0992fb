"""Every request is checked at the edge (issue 8, finding 6): wrong types, ranges and lengths are
INVALID_PARAMETER naming the field, on real processes, and the servers keep serving."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from rocketspark import Admin, Consumer, LocalCluster, Message, Producer
from rocketspark.protocol.bodies import pack
from rocketspark.protocol.codes import RequestCode, ResponseCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.remoting.client import RemotingClient

pytestmark = pytest.mark.integration


@pytest.fixture
def raw() -> Iterator[RemotingClient]:
    client = RemotingClient()
    yield client
    client.close()


def refused(client: RemotingClient, address: str, request: RemotingCommand, field: str) -> str:
    response = client.invoke(address, request)
    assert response.code == ResponseCode.INVALID_PARAMETER, response.remark
    assert f'field "{field}"' in response.remark and response.ext["error"] == "InvalidParameterError"
    return response.remark


def registration(broker: Any, topics: list[dict[str, Any]]) -> bytes:
    return pack({"cluster": "DefaultCluster", "broker": broker, "addr": "127.0.0.1:1", "topics": topics})


def test_a_registration_with_an_int_broker_name_is_refused_and_routes_keep_working(
    make_cluster: Callable[..., LocalCluster], raw: RemotingClient
) -> None:
    cluster = make_cluster(brokers=1)
    ns = cluster.nameserver
    with Admin(ns) as admin:
        admin.create_topic("shared-route", queues=2)
        bad = registration(7, [{"name": "shared-route", "r": 2, "w": 2, "perm": 6}])
        remark = refused(raw, ns, RemotingCommand.request(RequestCode.REGISTER_BROKER, {}, bad), "broker")
        assert remark == (
            'REGISTER_BROKER (103): the body field "broker" is invalid: expected `str`, got `int`'
        )  # was SUCCESS, and every later route query of shared-route failed with a TypeError
        huge = registration("broker-x", [{"name": f"t{i}", "r": 1, "w": 1, "perm": 6} for i in range(65_537)])
        remark = refused(raw, ns, RemotingCommand.request(RequestCode.REGISTER_BROKER, {}, huge), "topics")
        assert "expected `array` of length <= 65536" in remark
        assert sorted(admin.brokers()) == ["broker-a"]
        assert [b.broker_name for b in admin.topic_route("shared-route").brokers] == ["broker-a"]
    with Producer(ns) as producer, Consumer(ns) as consumer:
        sent = producer.send(Message("shared-route", b"after", queue_id=1))
        assert consumer.pull("shared-route", 1, sent.queue_offset).messages[0].body == b"after"


def test_a_queue_id_of_minus_7_is_refused_on_pulls_sends_and_offsets(
    shared_cluster: LocalCluster, raw: RemotingClient, topic_name: str
) -> None:
    with Admin(shared_cluster.nameserver) as admin:
        admin.create_topic(topic_name, queues=2, brokers=["broker-a"])
    broker = shared_cluster.brokers["broker-a"]
    queue = {"topic": topic_name, "queueId": -7}
    group = {**queue, "consumerGroup": "g"}
    for code, ext in [
        (RequestCode.PULL_MESSAGE, {**queue, "queueOffset": 0}),
        (RequestCode.SEND_MESSAGE, queue),
        (RequestCode.SEND_BATCH_MESSAGE, queue),
        (RequestCode.GET_MAX_OFFSET, queue),
        (RequestCode.GET_MIN_OFFSET, queue),
        (RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, {**queue, "timestamp": 0}),
        (RequestCode.UPDATE_CONSUMER_OFFSET, {**group, "commitOffset": 0}),
        (RequestCode.QUERY_CONSUMER_OFFSET, group),
    ]:
        remark = refused(raw, broker, RemotingCommand.request(code, ext), "queueId")
        assert "expected `int` >= " in remark and "got -7" in remark and RequestCode(code).name in remark
    stream = raw.invoke_stream(
        broker, RemotingCommand.request(RequestCode.PULL_MESSAGE, {**queue, "queueOffset": 0}), 5000
    )
    answers = list(stream)  # a streaming pull is checked the same way and ends at once
    assert [a.code for a in answers] == [ResponseCode.INVALID_PARAMETER] and '"queueId"' in answers[0].remark
    with Producer(shared_cluster.nameserver) as producer, Consumer(shared_cluster.nameserver) as consumer:
        producer.send(Message(topic_name, b"still serving", queue_id=1))
        assert consumer.pull(topic_name, 1, 0).messages[0].body == b"still serving"


def test_a_list_where_a_topic_name_belongs_is_refused_by_broker_and_nameserver(
    shared_cluster: LocalCluster, raw: RemotingClient
) -> None:
    as_list = {"topic": ["orders"]}
    for address, code in [
        (shared_cluster.nameserver, RequestCode.GET_ROUTEINFO_BY_TOPIC),
        (shared_cluster.nameserver, RequestCode.DELETE_TOPIC_IN_NAMESRV),
        (shared_cluster.brokers["broker-a"], RequestCode.UPDATE_AND_CREATE_TOPIC),
        (shared_cluster.brokers["broker-a"], RequestCode.GET_TOPIC_STATS_INFO),
    ]:
        remark = refused(raw, address, RemotingCommand.request(code, as_list), "topic")
        assert "expected `str`, got `array`" in remark


def test_an_oversized_topic_list_is_refused(shared_cluster: LocalCluster, raw: RemotingClient) -> None:
    ns = shared_cluster.nameserver
    topics = [f"t{i}" for i in range(1025)]
    for code in (RequestCode.SUBSCRIBE_TOPIC_ROUTE, RequestCode.UNSUBSCRIBE_TOPIC_ROUTE):
        request = RemotingCommand.request(code, {"clientId": "c", "topics": topics})
        assert "expected `array` of length <= 1024, got 1025 items" in refused(raw, ns, request, "topics")
    with Admin(ns) as admin:
        assert admin.nameserver_counters()["subscriptions"] == 0
