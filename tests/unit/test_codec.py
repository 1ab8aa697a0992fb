"""The msgpack codec of small request and response bodies (rocketspark.protocol.codec), and the
command and GC-pause pieces that shared this file before batch records replaced the old
record format (those live in rocketspark/codec and are tested in test_batch_codec.py)."""

from __future__ import annotations

import gc
import threading

import msgpack
import pytest

from rocketspark.protocol.codec import MalformedBody, pack, unpack
from rocketspark.protocol.codes import Flag, RequestCode, ResponseCode
from rocketspark.protocol.command import MalformedCommand, RemotingCommand
from rocketspark.protocol.types import GC_PAUSE

# --- pack / unpack -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        None,
        0,
        -(2**63),
        2**64 - 1,
        1.5,
        "",
        "ünïcødé",
        b"\x00\xffbytes",
        [],
        [1, "two", b"three", None],
        {"topic": "t", "queueId": 3, "nested": {"k": [1, 2]}},
    ],
)
def test_a_value_survives_pack_and_unpack(value: object) -> None:
    assert unpack(pack(value)) == value


def test_bytes_and_strings_stay_distinct_through_pack_and_unpack() -> None:
    assert unpack(pack([b"raw", "text"])) == [b"raw", "text"]
    assert [type(v) for v in unpack(pack([b"raw", "text"]))] == [bytes, str]


def test_maps_with_integer_keys_unpack() -> None:
    assert unpack(pack({1: "a", 2: "b"})) == {1: "a", 2: "b"}


def test_pack_is_plain_msgpack() -> None:
    assert pack({"a": [1, b"x"]}) == msgpack.packb({"a": [1, b"x"]}, use_bin_type=True)


@pytest.mark.parametrize(
    "data",
    [
        b"\xc1",  # a byte msgpack never uses
        b"\x92\x01",  # an array of two with one element
        msgpack.packb([1, 2]) + b"\x00",  # trailing bytes
        b"\xa5ab",  # a string shorter than it says
        b"\xa2\xff\xfe",  # a string that is not UTF-8
    ],
)
def test_garbage_is_a_malformed_body(data: bytes) -> None:
    with pytest.raises(MalformedBody, match="not valid msgpack"):
        unpack(data)


def test_malformed_body_is_a_value_error() -> None:
    assert issubclass(MalformedBody, ValueError)


# --- remoting commands ---------------------------------------------------------------------


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


# --- the decoders' GC pause ----------------------------------------------------------------


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


def test_the_gc_pause_leaves_a_disabled_gc_disabled() -> None:
    gc.disable()
    try:
        with GC_PAUSE:
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
