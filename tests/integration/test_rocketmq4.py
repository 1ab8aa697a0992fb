"""RocketMQ 4.x clients on real brokers: ali-ons (npm, the real client) for producing, push
consumer groups, retries and dead letters, static topics; a raw client speaking Java's frames
for what ali-ons does not do (batches, transactions, lookups by id, requests not served)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from rocketspark import Admin, Consumer, LocalCluster
from rocketspark.protocol.codes import ResponseCode
from rocketspark.rocketmq4 import records
from rocketspark.rocketmq4.codes import Code
from tests import rocketmq4
from tests.helpers import eventually

pytestmark = pytest.mark.integration

FAST_LEVELS = " ".join(["1s"] * 18)  # every delay level a second: retries come back quickly


@pytest.fixture(scope="module")
def cluster() -> Any:
    with LocalCluster(
        brokers=2,
        processes=True,
        broker_config={"auto_create_topic_enable": False, "message_delay_level": FAST_LEVELS},
        nameserver_config={"notify_max_load_per_cpu": 1000.0},
    ) as c:
        yield c


def _all_of(cluster: LocalCluster, topic: str) -> list[Any]:
    consumer = Consumer(cluster.nameserver)
    try:
        out = []
        for queue_id in range(len(consumer.queues(topic))):
            offset = 0
            while True:
                result = consumer.pull(topic, queue_id, offset, 256)
                if not result.messages:
                    break
                out.extend(result.messages)
                offset = result.next_offset
        return out
    finally:
        consumer.close()


def test_what_ali_ons_sends_with_tags_and_keys_our_consumer_reads_with_ids(cluster: LocalCluster) -> None:
    with Admin(cluster.nameserver) as admin:
        admin.create_topic("ons-plain", queues=4)
    sent = rocketmq4.produce(
        {"nameSrv": cluster.nameserver, "topic": "ons-plain", "count": 20, "tags": ["A", "B"], "keys": True}
    )
    results = [s for s in sent if "msgId" in s]
    assert len(results) == 20 and all(s["status"] == "SEND_OK" for s in results)
    assert {s["brokerName"] for s in results} == {"broker-a", "broker-b"}
    got = {m.body: m for m in _all_of(cluster, "ons-plain")}
    assert set(got) == {f"m-{i}".encode() for i in range(20)}
    for i in range(20):
        message = got[f"m-{i}".encode()]
        assert (message.tags, message.keys) == ("AB"[i % 2], [f"key-{i}"])
        assert len(message.properties["UNIQ_KEY"]) == 32  # the broker gave each one a client id
    # the id ali-ons was given (the offset id) finds the message
    with Admin(cluster.nameserver) as admin:
        for s in results[:3]:
            found = admin.query_message_by_id(s["msgId"])
            assert found.body == f"m-{s['i']}".encode()


def test_a_push_group_of_two_gets_every_matching_message_once_while_it_rebalances(cluster: LocalCluster) -> None:
    topic, group = "ons-group", "ons-group-g"
    with Admin(cluster.nameserver) as admin:
        admin.create_topic(topic, queues=4)
    options = {"nameSrv": cluster.nameserver, "topic": topic, "group": group, "expression": "A || C", "seconds": 240}

    def batch(start: int, count: int) -> None:
        rocketmq4.produce(
            {
                "nameSrv": cluster.nameserver,
                "topic": topic,
                "count": count,
                "tags": ["A", "B", "C"],
                "body": f"b{start}",
                "quiet": True,
            }
        )

    wanted: set[str] = set()
    first = rocketmq4.Consumer(options)
    second: rocketmq4.Consumer | None = None
    try:
        eventually(lambda: first.ready, 60)
        batch(0, 30)
        wanted |= {f"b0-{i}" for i in range(30) if i % 3 != 1}
        eventually(lambda: len(first.messages) == 20, 60)
        time.sleep(2)  # its offsets persisted (every second)
        second = rocketmq4.Consumer(options)  # the group rebalances: four queues, two members
        eventually(lambda: second is not None and second.ready, 60)
        time.sleep(5)  # both have rebalanced (every 2 s)
        batch(100, 30)
        wanted |= {f"b100-{i}" for i in range(30) if i % 3 != 1}
        eventually(lambda: len(first.messages) + len(second.messages) == 40, 60)
        assert first.messages[20:] and second.messages, "both members got a share after the rebalance"
        time.sleep(2)
        first.stop()  # the group rebalances again: the second member takes every queue
        time.sleep(5)
        batch(200, 30)
        wanted |= {f"b200-{i}" for i in range(30) if i % 3 != 1}
        eventually(lambda: len(first.messages) + len(second.messages) == 60, 60)
        time.sleep(3)
        bodies = Counter(m["body"] for c in (first, second) for m in c.messages)
        assert set(bodies) == wanted and set(bodies.values()) == {1}, "every matching message, each once"
        assert all(m["tags"] in ("A", "C") for c in (first, second) for m in c.messages)

        # its committed offsets reach every queue's end, and show in `rocketspark admin progress`. A
        # queue that ends with a message the group filters out (a "B") gets there only once its
        # consumer learns the offset past it: RocketMQ's clients (ali-ons as the Java one) move a
        # queue's offset past filtered messages only while none of its messages is still being
        # consumed, else at the next pull that finds nothing new (after its long poll)
        def caught_up() -> bool:
            with Admin(cluster.nameserver) as admin:
                rows = admin.consumer_progress(group, topic)
            return sum(r.broker_offset for r in rows) == 90 and all(
                r.consumer_offset == r.broker_offset and r.lag == 0 for r in rows
            )

        eventually(caught_up, 90, interval_s=0.5)
        shown = subprocess.run(
            [sys.executable, "-m", "rocketspark.cli", "admin", "-n", cluster.nameserver, "progress", group, topic],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert shown.returncode == 0, shown.stderr
        with Admin(cluster.nameserver) as admin:
            rows = admin.consumer_progress(group, topic)
        table = [[cell.strip() for cell in line.split("│")[1:-1]] for line in shown.stdout.splitlines() if "│" in line]
        assert [(int(q), broker, int(end), int(done)) for q, broker, end, done, _lag in table] == [
            (r.queue_id, r.broker_name, r.broker_offset, r.consumer_offset) for r in rows
        ]
    finally:
        first.stop()
        if second is not None:
            second.stop()


def test_a_message_failed_goes_to_the_retry_topic_and_after_the_maximum_to_the_dlq(cluster: LocalCluster) -> None:
    topic, group = "ons-retry", "ons-retry-g"
    with Admin(cluster.nameserver) as admin:
        admin.create_topic(topic, queues=2)
    options = {
        "nameSrv": cluster.nameserver,
        "topic": topic,
        "group": group,
        "fail": {"tag": "F"},
        "maxReconsumeTimes": 2,
        "seconds": 240,
    }
    with rocketmq4.Consumer(options) as consumer:
        eventually(lambda: consumer.ready, 60)
        rocketmq4.produce({"nameSrv": cluster.nameserver, "topic": topic, "count": 2, "tags": ["F", "OK"]})
        # delivered, then twice again from %RETRY% (consumed again 1 and 2 times), then dead
        eventually(lambda: len(consumer.failures) >= 3, 90)
        failures = consumer.failures
        assert [f["reconsumeTimes"] for f in failures[:3]] == [0, 1, 2]
        assert [m["body"] for m in consumer.messages] == ["m-1"]
        dead = eventually(lambda: _all_of(cluster, f"%DLQ%{group}") or None, 60)
    assert [m.body for m in dead] == [b"m-0"]
    assert dead[0].properties["RECONSUME_TIME"] == "3" and dead[0].properties["RETRY_TOPIC"] == topic
    retried = _all_of(cluster, f"%RETRY%{group}")
    assert [m.body for m in retried] == [b"m-0", b"m-0"]
    assert {m.properties["UNIQ_KEY"] for m in [*retried, *dead]} == {dead[0].properties["UNIQ_KEY"]}


def test_a_static_topic_remapped_under_an_ali_ons_consumer_gets_every_message_once(cluster: LocalCluster) -> None:
    topic, group = "ons-static", "ons-static-g"
    with Admin(cluster.nameserver) as admin:
        admin.create_static_topic(topic, 4, brokers=["broker-a"])
    options = {"nameSrv": cluster.nameserver, "topic": topic, "group": group, "seconds": 240}
    with rocketmq4.Consumer(options) as consumer:
        eventually(lambda: consumer.ready, 60)
        rocketmq4.produce({"nameSrv": cluster.nameserver, "topic": topic, "count": 40, "body": "before", "quiet": True})
        eventually(lambda: len(consumer.messages) == 40, 60)
        with Admin(cluster.nameserver) as admin:
            admin.remap_static_topic(topic, [0, 1, 2, 3], "broker-b")
        rocketmq4.produce({"nameSrv": cluster.nameserver, "topic": topic, "count": 40, "body": "after", "quiet": True})
        eventually(lambda: len(consumer.messages) >= 80, 90)
        time.sleep(3)
        bodies = Counter(m["body"] for m in consumer.messages)
    expected = {f"{p}-{i}" for p in ("before", "after") for i in range(40)}
    assert set(bodies) == expected and set(bodies.values()) == {1}
    assert {m["queueId"] for m in consumer.messages} <= {0, 1, 2, 3}
    with Admin(cluster.nameserver) as admin:
        route = admin.topic_route(topic)
    assert route.mapping is not None and all(items[-1].bname == "broker-b" for items in route.mapping.queues.values())


def test_routes_are_rocketmqs_topic_route_data(cluster: LocalCluster) -> None:
    with Admin(cluster.nameserver) as admin:
        admin.create_topic("ons-route", queues=3)
    with rocketmq4.RawClient(cluster.nameserver) as client:
        answer = client.call(Code.GET_ROUTEINFO_BY_TOPIC, {"topic": "ons-route"})
        missing = client.call(Code.GET_ROUTEINFO_BY_TOPIC, {"topic": "no-such-topic"})
        clusters = client.call(Code.GET_BROKER_CLUSTER_INFO)
    route = json.loads(answer.body)
    assert answer.code == ResponseCode.SUCCESS and route["filterServerTable"] == {}
    assert sorted(q["brokerName"] for q in route["queueDatas"]) == ["broker-a", "broker-b"]
    assert all(q["readQueueNums"] == 3 and q["perm"] == 6 for q in route["queueDatas"])
    addresses = {b["brokerName"]: b["brokerAddrs"]["0"] for b in route["brokerDatas"]}
    assert addresses == cluster.brokers
    assert missing.code == ResponseCode.TOPIC_NOT_EXIST and "no-such-topic" in missing.remark
    assert set(json.loads(clusters.body)["brokerAddrTable"]) == {"broker-a", "broker-b"}


def test_a_request_not_served_is_refused_by_name(cluster: LocalCluster) -> None:
    broker = cluster.brokers["broker-a"]
    with rocketmq4.RawClient(broker) as client:
        answer = client.call(307, {"consumerGroup": "g"})  # GET_CONSUMER_RUNNING_INFO
    assert answer.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert "GET_CONSUMER_RUNNING_INFO (307)" in answer.remark and "SEND_MESSAGE_V2" in answer.remark


def _send(client: rocketmq4.RawClient, topic: str, body: bytes, properties: dict[str, str], **ext: Any) -> Any:
    header = {
        "a": "raw-producer",
        "b": topic,
        "c": "TBW102",
        "d": 4,
        "e": 0,
        "f": 0,
        "g": int(time.time() * 1000),
        "h": 0,
        "i": records.properties_string(properties),
        "j": 0,
        "k": "false",
        **ext,
    }
    return client.call(Code.SEND_MESSAGE_V2, header, body)


def test_a_batch_send_is_one_batch_and_each_message_keeps_its_own_client_id(cluster: LocalCluster) -> None:
    with Admin(cluster.nameserver) as admin:
        admin.create_topic("ons-batch", queues=1, brokers=["broker-a"])
    body = b"".join(
        records.encode_batch_message(f"b{i}".encode(), {"UNIQ_KEY": f"{i:032X}", "TAGS": "T"}) for i in range(5)
    )
    with rocketmq4.RawClient(cluster.brokers["broker-a"]) as client:
        header = {
            "a": "raw",
            "b": "ons-batch",
            "e": 0,
            "f": 0,
            "g": 1,
            "h": 0,
            "i": "",
            "j": 0,
            "k": "false",
            "m": "true",
        }
        answer = client.call(Code.SEND_BATCH_MESSAGE, header, body)
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    assert len(answer.ext["msgId"].split(",")) == 5 and answer.ext["queueOffset"] == "0"
    got = _all_of(cluster, "ons-batch")
    assert [(m.body, m.properties["UNIQ_KEY"], m.tags) for m in got] == [
        (f"b{i}".encode(), f"{i:032X}", "T") for i in range(5)
    ]
    assert len({m.commitlog_offset for m in got}) == 1  # one batch record


def test_pulls_view_and_send_back_name_messages_by_physical_offset(cluster: LocalCluster) -> None:
    with Admin(cluster.nameserver) as admin:
        admin.create_topic("ons-view", queues=1, brokers=["broker-b"])
    broker = cluster.brokers["broker-b"]
    with rocketmq4.RawClient(broker) as client:
        for i in range(3):
            assert _send(client, "ons-view", f"v{i}".encode(), {"KEYS": f"k{i}"}).code == ResponseCode.SUCCESS
        pulled = client.call(
            Code.PULL_MESSAGE,
            {
                "consumerGroup": "raw-g",
                "topic": "ons-view",
                "queueId": 0,
                "queueOffset": 1,
                "maxMsgNums": 1,
                "sysFlag": 0,
                "commitOffset": 0,
                "suspendTimeoutMillis": 0,
                "subVersion": 0,
            },
        )
        assert pulled.code == ResponseCode.SUCCESS and pulled.ext["nextBeginOffset"] == "2"
        (record,) = list(records.decode(pulled.body))
        assert (record.body, record.queue_offset, record.properties["KEYS"]) == (b"v1", 1, "k1")
        viewed = client.call(Code.VIEW_MESSAGE_BY_ID, {"offset": record.physical_offset})
        assert [r.body for r in records.decode(viewed.body)] == [b"v1"]
        gone = client.call(Code.VIEW_MESSAGE_BY_ID, {"offset": 10**12})
        assert gone.code == ResponseCode.QUERY_NOT_FOUND
        query = {"topic": "ons-view", "key": "k2", "maxNum": 8, "beginTimestamp": 0, "endTimestamp": 2**62}

        def by_key() -> list[bytes] | None:  # the key index follows the log a moment behind
            return [r.body for r in records.decode(client.call(Code.QUERY_MESSAGE, query).body)] or None

        assert eventually(by_key, 30) == [b"v2"]


def test_a_transaction_is_committed_or_rolled_back_and_an_open_one_is_checked_back(cluster: LocalCluster) -> None:
    with Admin(cluster.nameserver) as admin:
        admin.create_topic("ons-tx", queues=1, brokers=["broker-a"])
    broker = cluster.brokers["broker-a"]
    heartbeat = json.dumps({"clientID": "raw-tx@1", "producerDataSet": [{"groupName": "tx-g"}], "consumerDataSet": []})
    with rocketmq4.RawClient(broker) as client:
        assert client.call(Code.HEART_BEAT, body=heartbeat.encode()).code == ResponseCode.SUCCESS
        halves = {}
        for name in ("commit", "rollback", "open"):
            answer = _send(
                client,
                "ons-tx",
                name.encode(),
                {"TRAN_MSG": "true", "PGROUP": "tx-g", "UNIQ_KEY": f"{name:>32}".replace(" ", "0").upper()},
            )
            assert answer.code == ResponseCode.SUCCESS, answer.remark
            halves[name] = answer
        assert _all_of(cluster, "ons-tx") == []  # half messages are in nobody's topic

        def end(name: str, outcome: int) -> None:
            answer = halves[name]
            client.request(
                Code.END_TRANSACTION,
                {
                    "producerGroup": "tx-g",
                    "tranStateTableOffset": answer.ext["queueOffset"],
                    "commitLogOffset": 0,
                    "commitOrRollback": outcome,
                    "fromTransactionCheck": "false",
                    "msgId": answer.ext["transactionId"],
                    "transactionId": answer.ext["transactionId"],
                    "topic": "ons-tx",
                },
                oneway=True,
            )

        end("commit", 8)
        end("rollback", 12)
        assert [m.body for m in eventually(lambda: _all_of(cluster, "ons-tx") or None, 30)] == [b"commit"]
        # the open one is checked back on this connection (transaction_timeout_ms 6 s)
        check = client.pushed.get(timeout=60)
        assert check.code == Code.CHECK_TRANSACTION_STATE
        (held,) = list(records.decode(check.body))
        assert held.body == b"open" and held.topic == "ons-tx"
        client.request(
            Code.END_TRANSACTION,
            {
                "producerGroup": "tx-g",
                "tranStateTableOffset": check.ext["tranStateTableOffset"],
                "commitLogOffset": 0,
                "commitOrRollback": 8,
                "fromTransactionCheck": "true",
                "msgId": check.ext["msgId"],
                "transactionId": check.ext["transactionId"],
                "topic": "ons-tx",
            },
            oneway=True,
        )
    got = eventually(lambda: ((m := _all_of(cluster, "ons-tx")) and len(m) == 2 and m) or None, 30)
    assert sorted(m.body for m in got) == [b"commit", b"open"]


def test_a_delay_level_holds_a_message_until_its_time(cluster: LocalCluster) -> None:
    with Admin(cluster.nameserver) as admin:
        admin.create_topic("ons-delay", queues=1, brokers=["broker-a"])
    with rocketmq4.RawClient(cluster.brokers["broker-a"]) as client:
        sent = time.time()
        assert _send(client, "ons-delay", b"later", {"DELAY": "3"}).code == ResponseCode.SUCCESS
        assert _all_of(cluster, "ons-delay") == []
    got = eventually(lambda: _all_of(cluster, "ons-delay") or None, 30)
    assert [m.body for m in got] == [b"later"] and got[0].store_timestamp / 1000 >= sent + 0.9


@pytest.mark.parametrize(
    "ext, body, problem",
    [
        ({"a": "p", "e": 0, "i": ""}, b"x", 'needs the "topic" header field'),
        ({"a": "p", "b": "ons-plain", "e": "zero"}, b"x", "header field \"queueId\" is 'zero', not an integer"),
        ({"a": "p", "b": "ons-plain", "e": 0, "f": 1}, b"not zlib", "does not inflate"),
        ({"a": "p", "b": "ons-plain", "e": 0, "i": "broken"}, b"x", "not RocketMQ's name"),
    ],
)
def test_a_malformed_send_is_refused_with_what_is_wrong(
    cluster: LocalCluster, ext: dict[str, Any], body: bytes, problem: str
) -> None:
    with rocketmq4.RawClient(cluster.brokers["broker-a"]) as client:
        answer = client.call(Code.SEND_MESSAGE_V2, ext, body)
    assert answer.code != ResponseCode.SUCCESS and problem in answer.remark


def test_with_auth_on_ali_ons_signs_as_acl_1_and_a_wrong_secret_is_refused(
    make_cluster: Callable[..., LocalCluster],
) -> None:
    secured = make_cluster(1, auth=True)
    with Admin(secured.nameserver, **secured.client_options) as admin:
        admin.create_topic("ons-secure", queues=1)
        admin.create_user("ons-user", "ons-secret-1")
        admin.set_acl("ons-user", "Topic:ons-secure", ["Pub"])
    ok = rocketmq4.produce(
        {
            "nameSrv": secured.nameserver,
            "topic": "ons-secure",
            "count": 2,
            "accessKeyId": "ons-user",
            "accessKeySecret": "ons-secret-1",
        }
    )
    assert len([s for s in ok if "msgId" in s]) == 2
    with pytest.raises(AssertionError, match="signature does not match"):
        rocketmq4.produce(
            {
                "nameSrv": secured.nameserver,
                "topic": "ons-secure",
                "count": 1,
                "accessKeyId": "ons-user",
                "accessKeySecret": "wrong",
            },
            timeout_s=60,
        )
    with Admin(secured.nameserver, **secured.client_options) as admin:
        admin.create_topic("ons-other", queues=1)
    with pytest.raises(AssertionError, match="lacks Get or Pub or Sub on Topic:ons-other"):
        rocketmq4.produce(
            {
                "nameSrv": secured.nameserver,
                "topic": "ons-other",
                "count": 1,
                "accessKeyId": "ons-user",
                "accessKeySecret": "ons-secret-1",
            },
            timeout_s=60,
        )


def _heartbeat(client: rocketmq4.RawClient, client_id: str, group: str, topic: str) -> Any:
    body = {
        "clientID": client_id,
        "producerDataSet": [],
        "consumerDataSet": [
            {
                "groupName": group,
                "consumeType": "CONSUME_PASSIVELY",
                "messageModel": "CLUSTERING",
                "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                "unitMode": False,
                "subscriptionDataSet": [{"topic": topic, "subString": "*", "expressionType": "TAG", "subVersion": 1}],
            }
        ],
    }
    return client.call(Code.HEART_BEAT, body=json.dumps(body).encode())


def test_a_groups_members_are_listed_and_told_when_it_changes(cluster: LocalCluster) -> None:
    with Admin(cluster.nameserver) as admin:
        admin.create_topic("ons-members", queues=2, brokers=["broker-a"])
    broker = cluster.brokers["broker-a"]
    with rocketmq4.RawClient(broker) as one, rocketmq4.RawClient(broker) as two:
        assert _heartbeat(one, "10.0.0.1@1", "members-g", "ons-members").code == ResponseCode.SUCCESS
        assert one.pushed.get(timeout=10).code == Code.NOTIFY_CONSUMER_IDS_CHANGED  # the group changed: it joined
        listed = one.call(Code.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "members-g"})
        assert json.loads(listed.body) == {"consumerIdList": ["10.0.0.1@1"]}
        assert _heartbeat(two, "10.0.0.2@2", "members-g", "ons-members").code == ResponseCode.SUCCESS
        told = one.pushed.get(timeout=10)  # NOTIFY_CONSUMER_IDS_CHANGED, oneway, on its connection
        assert (told.code, told.ext["consumerGroup"]) == (Code.NOTIFY_CONSUMER_IDS_CHANGED, "members-g")
        listed = one.call(Code.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "members-g"})
        assert sorted(json.loads(listed.body)["consumerIdList"]) == ["10.0.0.1@1", "10.0.0.2@2"]
        two.close()  # its connection closed: it leaves the group at once, and the other is told
        assert one.pushed.get(timeout=10).code == Code.NOTIFY_CONSUMER_IDS_CHANGED
        listed = one.call(Code.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "members-g"})
        assert json.loads(listed.body)["consumerIdList"] == ["10.0.0.1@1"]


def test_a_queues_bounds_and_offsets_by_time_and_a_groups_commits(cluster: LocalCluster) -> None:
    with Admin(cluster.nameserver) as admin:
        admin.create_topic("ons-bounds", queues=1, brokers=["broker-a"])
    with rocketmq4.RawClient(cluster.brokers["broker-a"]) as client:
        for i in range(3):
            _send(client, "ons-bounds", f"b{i}".encode(), {})
            time.sleep(0.05)
        queue = {"topic": "ons-bounds", "queueId": 0}
        assert client.call(Code.GET_MAX_OFFSET, queue).ext["offset"] == "3"
        assert client.call(Code.GET_MIN_OFFSET, queue).ext["offset"] == "0"
        assert client.call(Code.SEARCH_OFFSET_BY_TIMESTAMP, {**queue, "timestamp": 0}).ext["offset"] == "0"
        later = client.call(Code.SEARCH_OFFSET_BY_TIMESTAMP, {**queue, "timestamp": int(time.time() * 1000) + 60_000})
        assert later.ext["offset"] == "3"
        group = {"consumerGroup": "bounds-g", **queue}
        assert client.call(Code.QUERY_CONSUMER_OFFSET, group).code == ResponseCode.QUERY_NOT_FOUND
        client.call(Code.UPDATE_CONSUMER_OFFSET, {**group, "commitOffset": 2})
        client.call(Code.UPDATE_CONSUMER_OFFSET, {**group, "commitOffset": -1})  # ali-ons' way of saying 0: none
        assert client.call(Code.QUERY_CONSUMER_OFFSET, group).ext["offset"] == "2"


def test_an_sql92_subscription_of_ali_ons_gets_exactly_the_matching_messages(cluster: LocalCluster) -> None:
    topic = "ons-sql"
    with Admin(cluster.nameserver) as admin:
        admin.create_topic(topic, queues=2)
    rocketmq4.produce(
        {
            "nameSrv": cluster.nameserver,
            "topic": topic,
            "count": 30,
            "tags": ["A", "B"],
            "properties": {"amount": "{i}"},
        }
    )
    options = {
        "nameSrv": cluster.nameserver,
        "topic": topic,
        "group": "ons-sql-g",
        "sql": "amount >= 10 AND TAGS = 'A'",
    }
    with rocketmq4.Consumer({**options, "until": 10, "seconds": 120}) as consumer:
        assert consumer.wait(150) == 0
    assert sorted(int(m["body"][2:]) for m in consumer.messages) == [i for i in range(10, 30) if i % 2 == 0]
    with rocketmq4.Consumer({**options, "group": "ons-sql-bad", "sql": "amount >", "seconds": 8}) as refused:
        refused.wait(60)
    assert any("Invalid SQL92 filter expression 'amount >'" in e and "column 9" in e for e in refused.errors), (
        refused.errors[-5:]
    )
    assert refused.messages == []
