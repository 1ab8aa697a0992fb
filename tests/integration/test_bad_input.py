"""Bad input gets a clear error, and the servers stay up."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable

import msgpack
import pytest

from rocketspark import Admin, Consumer, LocalCluster, Message, Producer, PullStatus
from rocketspark.codec.build import Idempotence, encode_messages
from rocketspark.codec.layout import BODY_AT, BODY_CRC_AT, BROKER_AT, BROKER_END, HEADER_SIZE, ZSTD
from rocketspark.errors import (
    ConnectError,
    IllegalTopicNameError,
    InvalidAddressError,
    InvalidParameterError,
    MessageTooLargeError,
    NoNameServerError,
    NoRouteInfoError,
    ProducerFencedError,
)
from rocketspark.protocol.codes import RequestCode, ResponseCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.types import SendResult
from rocketspark.remoting import frame
from tests.helpers import frame_bytes, free_port, raw_exchange

pytestmark = pytest.mark.integration


def test_no_nameserver_address_is_a_clear_error() -> None:
    with pytest.raises(NoNameServerError, match=r"No name server address, please set it.*ROCKETSPARK_NAMESRV"):
        Producer()


def test_a_nameserver_that_is_not_running_is_named_in_the_error() -> None:
    address = f"127.0.0.1:{free_port()}"
    with Producer(address) as producer, pytest.raises(ConnectError) as info:
        producer.send(Message("orders", b"x"))
    expected = f'the route of topic "orders": no nameserver answered: cannot reach nameserver at {address}'
    assert expected in str(info.value)
    assert "(connection refused). Is it running?" in str(info.value)


def test_a_malformed_address_is_rejected_before_any_call() -> None:
    with pytest.raises(InvalidAddressError, match='"localhost" is not a valid address: expected host:port'):
        Consumer("localhost")


def test_an_unknown_topic_with_auto_create_off_explains_why(shared_cluster: LocalCluster) -> None:
    with Producer(shared_cluster.nameserver) as producer, pytest.raises(NoRouteInfoError) as info:
        producer.send(Message("never-created", b"x"))
    text = str(info.value)
    assert 'No route info of this topic "never-created"' in text
    assert "no broker offers auto-creation either (auto_create_topic_enable is off)" in text
    assert "rocketspark admin create-topic never-created" in text


def test_an_oversized_message_is_refused_by_the_producer(shared_cluster: LocalCluster, topic_name: str) -> None:
    with (
        Producer(shared_cluster.nameserver, max_message_bytes=1000) as producer,
        pytest.raises(MessageTooLargeError) as info,
    ):
        producer.send(Message(topic_name, b"x" * 1001))
    assert "1001 bytes, over the producer's limit of 1000 bytes" in str(info.value)


def test_an_oversized_message_is_refused_by_the_broker_and_nothing_is_stored(
    make_cluster: Callable[..., LocalCluster], topic_name: str
) -> None:
    cluster = make_cluster(brokers=1, broker_config={"max_message_bytes": 10_000})
    with Admin(cluster.nameserver) as admin:
        admin.create_topic(topic_name, queues=1)
    with Producer(cluster.nameserver, max_message_bytes=1 << 20) as producer:
        with pytest.raises(MessageTooLargeError, match="over broker broker-a's limit of 10000 bytes"):
            producer.send_batch([Message(topic_name, b"ok"), Message(topic_name, b"x" * 20_000)])
        producer.send(Message(topic_name, b"fine"))
    with Consumer(cluster.nameserver) as consumer:
        assert [m.body for m in consumer.pull(topic_name, 0, 0).messages] == [b"fine"]  # all-or-nothing batch


def test_an_illegal_topic_name_is_refused_by_client_and_broker(shared_cluster: LocalCluster) -> None:
    with Producer(shared_cluster.nameserver) as producer, pytest.raises(IllegalTopicNameError, match="illegal"):
        producer.send(Message("bad topic!", b"x"))
    with Admin(shared_cluster.nameserver) as admin, pytest.raises(IllegalTopicNameError):
        admin.create_topic("a" * 200)
    response = _raw_call(
        shared_cluster.brokers["broker-a"],
        frame_bytes(RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "no/slashes"})),
    )
    assert response.code == ResponseCode.INVALID_PARAMETER and "a legal topic name" in response.remark


def _raw_call(address: str, payload: bytes) -> RemotingCommand:
    response = raw_exchange(address, payload)
    assert response is not None, "the server closed the connection instead of answering"
    return response


def _garbage_frame(header: bytes) -> bytes:
    return struct.pack(">iI", 4 + len(header), (frame.MSGPACK << 24) | len(header)) + header


@pytest.mark.parametrize(
    ("payload", "code", "fragment"),
    [
        (_garbage_frame(b"\x00\x01garbage"), None, ""),
        (_garbage_frame(msgpack.packb({"not": "a command"})), None, ""),
        (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", None, ""),
        (
            frame_bytes(RemotingCommand.request(RequestCode.SEND_MESSAGE, {"topic": "t"}, b"\xc1")),
            ResponseCode.MALFORMED_REQUEST,
            "truncated record header",
        ),
        (
            frame_bytes(RemotingCommand.request(RequestCode.PULL_MESSAGE, {"topic": "t"})),
            ResponseCode.INVALID_PARAMETER,
            'the header field "queueId" is required',
        ),
        (
            frame_bytes(
                RemotingCommand.request(RequestCode.PULL_MESSAGE, {"topic": "t", "queueId": "0", "queueOffset": 0})
            ),
            ResponseCode.INVALID_PARAMETER,
            'the header field "queueId" is invalid: expected `int`, got `str`',
        ),
        (frame_bytes(RemotingCommand.request(4242)), ResponseCode.REQUEST_CODE_NOT_SUPPORTED, "4242 is not supported"),
    ],
)
def test_malformed_requests_straight_to_the_remoting_port_get_an_answer_or_a_closed_connection(
    shared_cluster: LocalCluster, topic_name: str, payload: bytes, code: int | None, fragment: str
) -> None:
    """A frame that parses gets an answer saying what is wrong; one that does not (garbage, an
    HTTP request) ends its connection: nothing after it on that stream can be trusted."""
    envelope_only = code in (None, ResponseCode.REQUEST_CODE_NOT_SUPPORTED)
    targets = [shared_cluster.brokers["broker-a"]] + ([shared_cluster.nameserver] if envelope_only else [])
    for address in targets:
        response = raw_exchange(address, payload)
        if code is None:
            assert response is None
        else:
            assert response is not None and response.code == code and fragment in response.remark
    with Admin(shared_cluster.nameserver) as admin:  # still serving
        admin.create_topic(topic_name, queues=1)
    with Producer(shared_cluster.nameserver) as producer:
        assert producer.send(Message(topic_name, b"after")).queue_offset == 0


def test_pulls_outside_the_queue_are_statuses_not_exceptions(shared_cluster: LocalCluster, topic_name: str) -> None:
    with Admin(shared_cluster.nameserver) as admin:
        admin.create_topic(topic_name, queues=1, brokers=["broker-a"])
    with Producer(shared_cluster.nameserver) as producer:
        producer.send_batch([Message(topic_name, b"x")] * 5)
    with Consumer(shared_cluster.nameserver) as consumer:
        above = consumer.pull(topic_name, 0, 50)
        assert (above.status, above.next_offset, above.max_offset) == (PullStatus.OFFSET_ILLEGAL, 5, 5)
        at_end = consumer.pull(topic_name, 0, 5)
        assert (at_end.status, at_end.next_offset) == (PullStatus.NO_NEW_MSG, 5)
        below = consumer.pull(topic_name, 0, -3)
        assert (below.status, below.next_offset) == (PullStatus.OFFSET_ILLEGAL, 0)
        with pytest.raises(InvalidParameterError, match="queue 9 does not exist"):
            consumer.pull(topic_name, 9, 0)


def _with_crcs(record: bytearray) -> bytes:
    """Recompute both CRCs after a deliberate change, so that only the structure check can
    catch it (a producer that builds records wrongly, not a damaged wire)."""
    record[BODY_CRC_AT : BODY_CRC_AT + 4] = zlib.crc32(record[BODY_AT:]).to_bytes(4, "big")
    record[8:12] = zlib.crc32(record[BROKER_AT:BROKER_END]).to_bytes(4, "big")
    return bytes(record)


def _count_off_by_one(record: bytes) -> bytes:
    patched = bytearray(record)
    count = int.from_bytes(patched[52:56], "big")
    patched[52:56] = (count + 1).to_bytes(4, "big")
    return _with_crcs(patched)


def _lengths_off(record: bytes) -> bytes:
    patched = bytearray(record)
    first_body_end = HEADER_SIZE + int.from_bytes(patched[50:52], "big") + 4  # body_offsets[1]
    patched[first_body_end] ^= 0x7F
    return _with_crcs(patched)


def _undecompressable(topic: str) -> bytes:
    record = bytearray(encode_messages(topic, [Message(topic, b"z" * 500)] * 4, compression_kind=ZSTD))
    start = HEADER_SIZE + len(topic)
    record[start + 8 : start + 24] = b"\xff" * 16  # inside the zstd frame
    return _with_crcs(record)


@pytest.mark.parametrize(
    ("build", "error", "fragment"),
    [
        (
            lambda t: _count_off_by_one(encode_messages(t, [Message(t, b"a"), Message(t, b"b")])),
            "malformed",
            "do not add up",
        ),
        (lambda t: _lengths_off(encode_messages(t, [Message(t, b"a"), Message(t, b"b")])), "malformed", "offsets"),
        (
            lambda t: encode_messages(t, [Message(t, b"x" * 9_000)] * 3),
            "too large",
            "over broker broker-a's limit of 20000 bytes",
        ),
        (_undecompressable, "malformed", "does not decompress"),
        (lambda t: encode_messages(t, [Message(t, b"a")])[:-3], "malformed", "bad record header"),
    ],
    ids=["count disagrees", "lengths disagree", "over the batch limit", "does not decompress", "truncated"],
)
def test_a_bad_batch_record_gets_a_clear_error_and_stores_nothing(
    make_cluster: Callable[..., LocalCluster], topic_name: str, build: Callable[[str], bytes], error: str, fragment: str
) -> None:
    cluster = make_cluster(brokers=1, broker_config={"max_message_bytes": 10_000})
    with Admin(cluster.nameserver) as admin:
        admin.create_topic(topic_name, queues=1)
    request = RemotingCommand.request(
        RequestCode.SEND_BATCH_MESSAGE, {"topic": topic_name, "queueId": 0}, build(topic_name)
    )
    response = _raw_call(cluster.brokers["broker-a"], frame_bytes(request))
    code = ResponseCode.MALFORMED_REQUEST if error == "malformed" else ResponseCode.MESSAGE_ILLEGAL
    assert response.code == code and fragment in response.remark, response.remark
    with Producer(cluster.nameserver) as producer:  # still serving, and nothing of the bad batch stored
        assert producer.send(Message(topic_name, b"after")).queue_offset == 0


def test_a_producer_epoch_going_backwards_is_fenced(shared_cluster: LocalCluster, topic_name: str) -> None:
    with Admin(shared_cluster.nameserver) as admin:
        admin.create_topic(topic_name, queues=1)
    producer_id = 0x5EED

    def send(epoch: int, seq: int) -> SendResult:
        record = encode_messages(
            topic_name, [Message(topic_name, b"m")], idempotence=Idempotence(producer_id, epoch, seq)
        )
        return producer.send_to_queue(topic_name, 0, record)

    with Producer(shared_cluster.nameserver) as producer:
        assert send(epoch=2, seq=0).count == 1
        assert send(epoch=2, seq=0).duplicates == 1  # a resend, dropped
        with pytest.raises(ProducerFencedError, match=r"sent epoch 1 .* but epoch 2 of it has written there since"):
            send(epoch=1, seq=1)
        assert send(epoch=3, seq=0).count == 1  # a newer incarnation numbers afresh
        assert producer.send(Message(topic_name, b"plain")).queue_offset == 2
