"""v2 messages and errors onto ours: the one mapping, without a network."""

from __future__ import annotations

import gzip

import pytest

from rocketspark.errors import (
    AuthenticationError,
    InvalidParameterError,
    MessageTooLargeError,
    NoPermissionError,
    TopicNotExistError,
)
from rocketspark.grpcv2 import settings, translate
from rocketspark.grpcv2.stubs import definition_pb2 as pb


def v2(**system: object) -> pb.Message:
    message = pb.Message(topic=pb.Resource(name="orders"), body=b"hello")
    for key, value in system.items():
        if key == "keys":
            message.system_properties.keys.extend(value)  # type: ignore[arg-type]
        else:
            setattr(message.system_properties, key, value)
    return message


def test_a_v2_message_maps_onto_ours_with_its_group_id_and_born_time() -> None:
    message = v2(tag="TagA", keys=["k1", "k2"], message_id="01AB", message_group="customer-7")
    message.system_properties.born_timestamp.FromMilliseconds(1_700_000_000_123)
    message.user_properties["region"] = "eu"
    incoming = translate.to_message(message, 1024)
    ours = incoming.message
    assert (ours.topic, ours.body, ours.tags, ours.keys, ours.sharding_key) == (
        "orders",
        b"hello",
        "TagA",
        ["k1", "k2"],
        "customer-7",
    )
    assert ours.properties == {"region": "eu", "UNIQ_KEY": "01AB", "__SHARDINGKEY": "customer-7"}
    assert (incoming.message_id, incoming.born_ms) == ("01AB", 1_700_000_000_123)
    plain = translate.to_message(v2(), 1024)
    assert (plain.message.tags, plain.message.sharding_key, plain.born_ms) == (None, None, None)


def test_a_gzip_body_is_stored_as_it_was_written_and_bad_input_is_named() -> None:
    zipped = v2(body_encoding=pb.Encoding.GZIP)
    zipped.body = gzip.compress(b"x" * 1000)
    assert translate.to_message(zipped, 4096).message.body == b"x" * 1000
    zipped.body = b"not gzip"
    with pytest.raises(InvalidParameterError, match="the body says GZIP but does not decompress"):
        translate.to_message(zipped, 4096)
    with pytest.raises(MessageTooLargeError, match="message body of 5 bytes is over the limit of 4 bytes"):
        translate.to_message(v2(), 4)
    reserved = v2()
    reserved.user_properties["UNIQ_KEY"] = "mine"
    with pytest.raises(InvalidParameterError, match="user property 'UNIQ_KEY' is reserved"):
        translate.to_message(reserved, 1024)
    delayed = v2()
    delayed.system_properties.delivery_timestamp.FromMilliseconds(1_700_000_000_000)
    assert translate.to_message(delayed, 1024).deliver_at_ms == 1_700_000_000_000
    delayed.system_properties.message_type = pb.MessageType.TRANSACTION
    with pytest.raises(InvalidParameterError, match="may not have a delivery_timestamp"):
        translate.to_message(delayed, 1024)
    forged = v2()
    forged.user_properties["REAL_TOPIC"] = "elsewhere"  # would send a held message to another topic
    with pytest.raises(InvalidParameterError, match="user property 'REAL_TOPIC' is reserved"):
        translate.to_message(forged, 1024)


def test_a_stored_message_maps_back_with_the_digest_the_official_clients_check() -> None:
    from rocketspark.protocol.types import MessageExt

    stored = MessageExt(
        "t",
        2,
        7,
        b"body",
        "TagA",
        ["k1", "k2"],
        {"UNIQ_KEY": "01AB", "__SHARDINGKEY": "g", "region": "eu"},
        1_700_000_000_123,
        1_700_000_000_456,
        0,
        "broker-a",
    )
    out = translate.to_v2(stored, "t")
    system = out.system_properties
    assert (out.topic.name, out.body, system.tag, list(system.keys)) == ("t", b"body", "TagA", ["k1", "k2"])
    assert (system.message_id, system.message_group, system.message_type) == ("01AB", "g", pb.MessageType.FIFO)
    assert system.body_digest.type == pb.DigestType.CRC32 and system.body_digest.checksum == "DBA80BB2"
    assert system.body_encoding == pb.Encoding.IDENTITY and dict(out.user_properties) == {"region": "eu"}
    assert system.born_timestamp.ToMilliseconds() == 1_700_000_000_123
    assert (system.queue_id, system.queue_offset) == (2, 7)


def test_our_errors_become_the_v2_codes_the_clients_understand() -> None:
    for error, code in (
        (AuthenticationError("x"), pb.Code.UNAUTHORIZED),
        (NoPermissionError("x"), pb.Code.FORBIDDEN),
        (TopicNotExistError("x"), pb.Code.TOPIC_NOT_FOUND),
        (MessageTooLargeError("x"), pb.Code.MESSAGE_BODY_TOO_LARGE),
        (InvalidParameterError("x"), pb.Code.BAD_REQUEST),
    ):
        assert translate.status_for(error).code == code


def test_a_producer_is_told_rocketmqs_default_retries_and_a_consumer_its_receive_settings() -> None:
    producer = pb.Settings(client_type=pb.ClientType.PRODUCER)
    producer.publishing.topics.add(name="orders")
    told = settings.merged(producer, 4 * 1024 * 1024)
    assert told.backoff_policy.max_attempts == 3 and told.publishing.max_body_size == 4 * 1024 * 1024
    assert told.backoff_policy.exponential_backoff.initial.ToMilliseconds() == 10
    assert [t.name for t in told.publishing.topics] == ["orders"]
    consumer = pb.Settings(client_type=pb.ClientType.SIMPLE_CONSUMER)
    consumer.subscription.group.name = "g"
    told = settings.merged(consumer, 4 * 1024 * 1024)
    assert told.backoff_policy.max_attempts == 17 and told.subscription.receive_batch_size == 32
    assert told.subscription.long_polling_timeout.ToMilliseconds() == 20_000


def test_a_gzip_bomb_and_a_forged_retry_property_are_refused() -> None:
    bomb = v2(body_encoding=pb.Encoding.GZIP)
    bomb.body = gzip.compress(b"\0" * (8 * 1024 * 1024))  # about 8 KiB that would inflate to 8 MiB
    assert len(bomb.body) < 20_000
    with pytest.raises(MessageTooLargeError, match="inflates to over the limit of 4194304 bytes"):
        translate.to_message(bomb, 4 * 1024 * 1024)
    forged = v2()
    forged.user_properties["RECONSUME_TIME"] = "16"
    with pytest.raises(InvalidParameterError, match="user property 'RECONSUME_TIME' is reserved"):
        translate.to_message(forged, 1024)


def test_times_read_as_the_official_clients_write_them() -> None:
    python_client = v2()  # milliseconds in seconds, as its documentation has users give them
    python_client.system_properties.delivery_timestamp.seconds = 1_795_693_879_631
    assert translate.to_message(python_client, 1024).deliver_at_ms == 1_795_693_879_631
    whole_seconds = v2()  # the same client given whole seconds
    whole_seconds.system_properties.delivery_timestamp.seconds = 1_795_693_879
    assert translate.to_message(whole_seconds, 1024).deliver_at_ms == 1_795_693_879_000
    java_client = v2()  # seconds and nanos
    java_client.system_properties.born_timestamp.FromMilliseconds(1_795_693_879_631)
    assert translate.to_message(java_client, 1024).born_ms == 1_795_693_879_631


def test_a_priority_is_kept_as_rocketmqs_property_on_a_priority_message_only() -> None:
    incoming = translate.to_message(v2(message_type=pb.MessageType.PRIORITY, priority=7), 1024)
    assert incoming.priority == 7 and incoming.message.properties["_SYS_MSG_PRIORITY_"] == "7"
    lowest = translate.to_message(v2(priority=0), 1024)
    assert lowest.priority == 0 and lowest.message.properties["_SYS_MSG_PRIORITY_"] == "0"
    grouped = translate.to_message(v2(priority=7, message_group="g"), 1024)  # FIFO wins, as in RocketMQ
    assert grouped.priority is None and "_SYS_MSG_PRIORITY_" not in grouped.message.properties
    forged = v2()
    forged.user_properties["_SYS_MSG_PRIORITY_"] = "9"
    with pytest.raises(InvalidParameterError, match="'_SYS_MSG_PRIORITY_' is reserved"):
        translate.to_message(forged, 1024)


def test_a_stored_priority_goes_back_as_a_priority_message() -> None:
    from rocketspark.protocol.types import MessageExt

    def back(properties: dict[str, str]) -> pb.SystemProperties:
        stored = MessageExt("t", 0, 0, b"b", None, [], properties, 1, 2, 0, "broker-a")
        return translate.to_v2(stored, "t").system_properties

    system = back({"_SYS_MSG_PRIORITY_": "3"})
    assert (system.message_type, system.priority) == (pb.MessageType.PRIORITY, 3)
    hand_written = back({"_SYS_MSG_PRIORITY_": "high"})  # not a number: a normal message, property dropped
    assert hand_written.message_type == pb.MessageType.NORMAL and not hand_written.HasField("priority")
