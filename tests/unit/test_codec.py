"""The msgpack codec of small request and response bodies (rocketspark.protocol.bodies), and the
command and GC-pause pieces that shared this file before batch records replaced the old
record format (those live in rocketspark/codec and are tested in test_batch_codec.py)."""

from __future__ import annotations

import gc
import threading

import msgpack
import pytest

from rocketspark.protocol.bodies import MalformedBody, pack, unpack
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
