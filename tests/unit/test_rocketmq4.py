"""The RocketMQ 4.x dialect's wire pieces: records, batch bodies, properties, routes, ACL 1.0
signatures, and the table of request codes docs/clients/rocketmq4.md prints."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import zlib

import pytest

from broker.rocketmq4.members import Subscription
from broker.rocketmq4.messages import DelayLevels, deliver_at_ms, to_message
from rocketspark.errors import AuthenticationError, ConfigError, InvalidParameterError, MalformedRequestError
from rocketspark.protocol.static_mapping import LogicQueueMappingItem, TopicMapping
from rocketspark.protocol.types import BrokerData, QueueData, TopicRouteData
from rocketspark.rocketmq4 import records
from rocketspark.rocketmq4.codes import SERVED, Code, unserved_remark
from rocketspark.rocketmq4.headers import Fields, send_fields
from rocketspark.rocketmq4.route import route_json
from rocketspark.security import rocketmq_acl
from tests.helpers import docs_text


def test_a_record_encodes_as_rocketmqs_message_ext_v1() -> None:
    record = records.Record(
        "orders", 3, 42, 9000, b"body", {"TAGS": "A", "KEYS": "k1 k2"}, 1000, 2000, records.Host.parse("10.1.2.3:10911")
    )
    raw = records.encode(record)
    assert int.from_bytes(raw[:4], "big") == len(raw)
    assert raw[4:8] == bytes.fromhex("DAA320A7")  # V1 magic
    assert int.from_bytes(raw[8:12], "big") == zlib.crc32(b"body") & 0x7FFFFFFF
    assert raw[64:68] == bytes([10, 1, 2, 3]) and int.from_bytes(raw[68:72], "big") == 10911  # store host
    assert list(records.decode(raw + raw)) == [record, record]


def test_properties_are_pairs_joined_by_rocketmqs_separators() -> None:
    text = records.properties_string({"TAGS": "A", "UNIQ_KEY": "X"})
    assert text == "TAGS\x01A\x02UNIQ_KEY\x01X"
    assert records.parse_properties(text + "\x02") == {"TAGS": "A", "UNIQ_KEY": "X"}  # Java 4.x's trailing one too
    with pytest.raises(MalformedRequestError, match="name\\\\x01value"):
        records.parse_properties("no-separator")


def test_a_batch_body_decodes_message_by_message_and_refuses_sizes_that_do_not_add_up() -> None:
    body = records.encode_batch_message(b"one", {"TAGS": "A"}) + records.encode_batch_message(b"two", {}, flag=7)
    got = list(records.batch_messages(body))
    assert [(m.body, m.properties, m.flag) for m in got] == [(b"one", {"TAGS": "A"}, 0), (b"two", {}, 7)]
    with pytest.raises(MalformedRequestError, match=r"do not add up|ends inside"):
        list(records.batch_messages(body[:-3]))


def test_a_zlib_body_is_inflated_and_another_compression_is_refused() -> None:
    assert records.inflate(zlib.compress(b"x" * 5000), records.COMPRESSED) == b"x" * 5000
    with pytest.raises(InvalidParameterError, match="LZ4"):
        records.inflate(b"..", records.COMPRESSED | (1 << records.COMPRESSION_TYPE_SHIFT))
    with pytest.raises(MalformedRequestError, match="does not inflate"):
        records.inflate(b"not zlib", records.COMPRESSED)


def test_an_ipv6_or_named_broker_cannot_be_a_4x_store_host() -> None:
    with pytest.raises(InvalidParameterError, match="IPv4"):
        records.Host.parse("[::1]:10911")


def test_a_topic_longer_than_a_signed_byte_is_refused_for_4x_consumers() -> None:
    record = records.Record("t" * 128, 0, 0, 0, b"", {}, 0, 0, records.NO_HOST)
    with pytest.raises(InvalidParameterError, match="at most 127"):
        records.encode(record)


def test_send_message_v2_fields_get_their_long_names() -> None:
    fields = Fields("SEND_MESSAGE_V2", send_fields({"a": "pg", "b": "t", "e": "3", "k": "false"}, short=True))
    assert (fields.text("producerGroup"), fields.text("topic"), fields.integer("queueId"), fields.flag("unitMode")) == (
        "pg",
        "t",
        3,
        False,
    )
    with pytest.raises(MalformedRequestError, match="\"queueId\" is 'x'"):
        Fields("PULL", {"queueId": "x"}).integer("queueId")


def test_a_4x_message_keeps_its_tag_keys_and_properties_but_not_the_clients_own() -> None:
    message = to_message("t", b"b", {"TAGS": "A", "KEYS": "k1 k2", "UNIQ_KEY": "U", "WAIT": "true", "color": "red"})
    assert (message.tags, message.keys, message.properties) == ("A", ["k1", "k2"], {"UNIQ_KEY": "U", "color": "red"})


def test_delay_levels_follow_the_brokers_message_delay_level() -> None:
    levels = DelayLevels()
    assert [levels.ms(n) for n in (1, 3, 18)] == [1000, 10_000, 7_200_000]
    assert deliver_at_ms({"DELAY": "2"}, levels, now_ms=0) == 5000
    assert deliver_at_ms({"__STARTDELIVERTIME": "77"}, levels) == 77
    assert deliver_at_ms({"DELAY": "0"}, levels) is None and deliver_at_ms({}, levels) is None
    assert DelayLevels("1s 2m").ms(99) == 120_000  # past the last: the last
    with pytest.raises(ConfigError, match="message_delay_level"):
        DelayLevels("1x")


def test_a_tag_subscription_names_its_tags_and_star_is_everything() -> None:
    assert Subscription.of("t", "A || B ", None).tags == ["A", "B"]
    assert Subscription.of("t", "*", "TAG").tags is None
    assert Subscription.of("t", "a > 1", "sql92").expression_type == "SQL92"
    with pytest.raises(InvalidParameterError, match="not TAG or SQL92"):
        Subscription.of("t", "x", "CLASS")


def test_a_route_is_compact_topic_route_data_with_master_id_zero() -> None:
    route = TopicRouteData(
        "t",
        (BrokerData("c", "b", "10.0.0.2:1", ("10.0.0.3:1",)), BrokerData("c", "a", "10.0.0.1:1")),
        (QueueData("b", 4, 4, 6), QueueData("a", 2, 2, 4)),
    )
    text = route_json(route).decode()
    assert " " not in text  # the Go client splits brokerAddrs by hand
    body = json.loads(text)
    assert [q["brokerName"] for q in body["queueDatas"]] == ["a", "b"] and body["filterServerTable"] == {}
    assert body["brokerDatas"][1]["brokerAddrs"] == {"0": "10.0.0.2:1", "1": "10.0.0.3:1"}


def test_a_static_topic_is_one_brokers_logical_queues_with_rocketmq5s_mapping() -> None:
    items = {
        0: [LogicQueueMappingItem(0, 0, "a", 0, 0, 10), LogicQueueMappingItem(1, 0, "b", 10_000)],
        1: [LogicQueueMappingItem(0, 1, "a", 0)],
    }
    route = TopicRouteData(
        "st",
        (BrokerData("c", "a", "10.0.0.1:1"), BrokerData("c", "b", "10.0.0.2:1")),
        (QueueData("a", 2, 2, 6), QueueData("b", 1, 1, 6)),
        TopicMapping("st", 5, 2, items),
    )
    body = json.loads(route_json(route))
    assert body["queueDatas"] == [
        {"brokerName": "__syslo__global__", "perm": 6, "readQueueNums": 2, "topicSysFlag": 0, "writeQueueNums": 2}
    ]
    serving = next(b for b in body["brokerDatas"] if b["brokerName"] == "__syslo__global__")
    assert serving["brokerAddrs"]["0"] in ("10.0.0.1:1", "10.0.0.2:1")
    mapping = body["topicQueueMappingByBroker"]
    assert mapping["b"]["currIdMap"] == {"0": 0} and mapping["a"]["currIdMap"] == {"1": 1}
    assert mapping["a"]["totalQueues"] == 2 and mapping["a"]["epoch"] == 5


def test_an_acl_1_signature_is_hmac_sha1_over_the_sorted_values_and_the_body() -> None:
    # what ali-ons' channel.js computes: values of AccessKey, OnsChannel and the header fields, sorted by name
    ext = {"b": "topic", "a": "group", "e": "0", "OnsChannel": "ALIYUN", "AccessKey": "ak"}
    content = b"ak" + b"ALIYUN" + b"group" + b"topic" + b"0" + b"body"
    expected = base64.b64encode(hmac.new(b"sk", content, hashlib.sha1).digest()).decode()
    signed = rocketmq_acl.sign({k: v for k, v in ext.items() if k != "AccessKey"}, b"body", "ak", "sk")
    assert signed["Signature"] == expected
    rocketmq_acl.verify(signed, b"body", "sk")
    with pytest.raises(AuthenticationError, match="does not match"):
        rocketmq_acl.verify(signed, b"other body", "sk")
    with pytest.raises(AuthenticationError, match="not signed"):
        rocketmq_acl.claimed_access_key({"a": "1"})


def test_a_java_4_9_signature_with_the_unique_key_query_field_is_accepted_either_way() -> None:
    ext = {"topic": "t", "key": "k", rocketmq_acl.UNIQUE_KEY_QUERY: "true"}
    without = rocketmq_acl.sign({"topic": "t", "key": "k"}, b"", "ak", "sk")
    rocketmq_acl.verify({**without, rocketmq_acl.UNIQUE_KEY_QUERY: "true"}, b"", "sk")
    rocketmq_acl.verify(rocketmq_acl.sign(ext, b"", "ak", "sk"), b"", "sk")


def test_the_docs_list_every_4x_request_code_served() -> None:
    table = re.findall(r"^\| (\d+) \| `([A-Z_0-9]+)` \|", docs_text("clients/rocketmq4.md"), re.MULTILINE)
    assert sorted((int(c), n) for c, n in table) == sorted((int(c), c.name) for c in SERVED)


def test_every_4x_handler_is_in_the_table() -> None:
    from broker.rocketmq4 import register as broker_register
    from nameserver.rocketmq4 import register as nameserver_register

    class Recorder:
        def __init__(self) -> None:
            self.codes: set[int] = set()

        def register_rocketmq(self, code: int, handler: object) -> None:
            self.codes.add(int(code))

    class Anything:
        members = type("M", (), {"left": None})()

    recorder = Recorder()
    broker_register(recorder, Anything())  # type: ignore[arg-type]
    nameserver_register(recorder)  # type: ignore[arg-type]
    pushed = {Code.CHECK_TRANSACTION_STATE, Code.NOTIFY_CONSUMER_IDS_CHANGED}
    assert recorder.codes == {int(c) for c in SERVED if c not in pushed}
    assert "GET_CONSUMER_RUNNING_INFO (307)" in unserved_remark(307, "broker b", sorted(recorder.codes))
