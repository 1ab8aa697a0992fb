"""The wire codec: commands, send batches, payloads and records."""

from __future__ import annotations

import gc
import threading
import zlib

import msgpack
import pytest

from broker.store.recovery import tag_hash
from rocketspark.protocol.codec import (
    MalformedBody,
    check_payload,
    decode_send_batch,
    encode_send_batch,
    message_payload,
)
from rocketspark.protocol.codes import Flag, RequestCode, ResponseCode
from rocketspark.protocol.command import MalformedCommand, RemotingCommand
from rocketspark.protocol.record import RecordCorrupted, encode_payload, encode_record, msg_id
from rocketspark.protocol.types import GC_PAUSE, Message, decode_records


def test_a_command_survives_a_round_trip_through_bytes() -> None:
    request = RemotingCommand.request(RequestCode.SEND_MESSAGE, {"topic": "t", "queueId": 3}, b"\x00body")
    decoded = RemotingCommand.decode(request.encode())
    assert (decoded.code, decoded.opaque, decoded.ext, decoded.body) == (10, request.opaque, request.ext, b"\x00body")
    response = decoded.response(ResponseCode.TOPIC_NOT_EXIST, remark="no such topic")
    assert response.is_response and response.opaque == request.opaque and not response.is_oneway


def test_each_request_gets_a_new_opaque() -> None:
    assert RemotingCommand.request(1).opaque != RemotingCommand.request(1).opaque


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        (b"\xc1garbage", "not valid msgpack"),
        (msgpack.packb({"code": 10}), "must be a msgpack array"),
        (msgpack.packb(["10", 1, 0, "", {}, b""]), "must be integers"),
        (msgpack.packb([10, 1, 0, "", [], b""]), "ext a map"),
    ],
)
def test_malformed_commands_are_rejected_with_a_reason(data: bytes, fragment: str) -> None:
    with pytest.raises(MalformedCommand, match=fragment):
        RemotingCommand.decode(data)


def test_oneway_flag_is_a_bit_of_flag() -> None:
    command = RemotingCommand(1, flag=Flag.ONEWAY)
    assert command.is_oneway and not command.is_response


def test_a_send_batch_decodes_to_its_born_time_and_payloads() -> None:
    messages = [Message("t", b"a", tags="x", keys=["k"]), Message("t", b"bb"), Message("t", b"ccc", tags="")]
    born, payloads = decode_send_batch(encode_send_batch([message_payload(m) for m in messages]))
    assert born > 0 and len(payloads) == 3
    # the consume queue's tag hashes must never change: stored queues hold them
    assert [check_payload(p) for p in payloads] == [(tag_hash("x"), 1), (0, 2), (0, 3)]
    assert tag_hash("x") == zlib.crc32(b"x") == 0x8CDC1683


@pytest.mark.parametrize(
    "body",
    [
        msgpack.packb([]),
        msgpack.packb([1, []]),
        msgpack.packb(["x", [b"p"]]),
        msgpack.packb([1, ["not bin"]]),
        b"\xff\xff",
    ],
)
def test_a_malformed_send_batch_is_rejected(body: bytes) -> None:
    with pytest.raises(MalformedBody):
        decode_send_batch(body)


@pytest.mark.parametrize(
    "payload",
    [msgpack.packb([b"b", 5, None, None]), msgpack.packb(["s", None, None, None]), msgpack.packb([b"b"]), b"\xc1"],
)
def test_a_malformed_message_payload_is_rejected(payload: bytes) -> None:
    with pytest.raises(MalformedBody):
        check_payload(payload)


def _records(n: int) -> bytes:
    return b"".join(
        encode_record(
            topic_bytes=b"orders",
            payload=encode_payload(f"m{i}".encode(), "A", ["k"], {"p": "v"}),
            queue_id=1,
            queue_offset=10 + i,
            commitlog_offset=1000 + i * 100,
            born_ms=5,
            store_ms=6,
        )
        for i in range(n)
    )


def test_records_decode_to_messages_with_every_field() -> None:
    messages = decode_records(_records(3), "orders", "broker-a")
    assert [m.body for m in messages] == [b"m0", b"m1", b"m2"]
    first = messages[0]
    assert (first.queue_id, first.queue_offset, first.tags, first.keys, first.properties) == (
        1,
        10,
        "A",
        ["k"],
        {"p": "v"},
    )
    assert (first.born_timestamp, first.store_timestamp, first.broker_name) == (5, 6, "broker-a")
    assert first.msg_id == msg_id("broker-a", 1000)


def test_a_logical_view_rewrites_queue_id_and_offsets() -> None:
    messages = decode_records(_records(2), "orders", "b", queue_id=7, offset_delta=100)
    assert [(m.queue_id, m.queue_offset) for m in messages] == [(7, 110), (7, 111)]


def test_a_flipped_byte_in_a_record_fails_its_crc_check() -> None:
    data = bytearray(_records(3))
    data[-3] ^= 0xFF
    with pytest.raises(RecordCorrupted, match="CRC"):
        decode_records(bytes(data), "orders", "b")


def test_a_truncated_record_is_reported_not_crashed_on() -> None:
    with pytest.raises(RecordCorrupted):
        decode_records(_records(2)[:-10], "orders", "b")


def test_empty_keys_and_properties_read_as_empty_containers() -> None:
    record = encode_record(
        topic_bytes=b"t",
        payload=encode_payload(b"x", None, [], {}),
        queue_id=0,
        queue_offset=0,
        commitlog_offset=0,
        born_ms=0,
        store_ms=0,
    )
    (message,) = decode_records(record, "t", "b")
    assert message.keys == [] and message.properties == {} and message.tags is None


def test_the_gc_pause_of_concurrent_decoders_ends_with_the_last_one() -> None:
    assert gc.isenabled()
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen: list[bool] = []

    def first() -> None:
        with GC_PAUSE:
            first_in.set()
            second_in.wait(5)
        first_out.set()

    def second() -> None:
        first_in.wait(5)
        with GC_PAUSE:
            second_in.set()
            first_out.wait(5)
            seen.append(gc.isenabled())  # the first decoder left; this one still runs

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert seen == [False] and gc.isenabled()


def test_decoding_leaves_a_disabled_gc_disabled() -> None:
    gc.disable()
    try:
        decode_records(b"", "t", "b")
        with GC_PAUSE:
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
