"""RocketMQ's remoting frame: the three header serializations, round trips and garbage."""

from __future__ import annotations

import concurrent.futures
import json
import struct

import msgpack
import pytest

from rocketspark.protocol.codes import Flag, RequestCode, ResponseCode
from rocketspark.protocol.command import MalformedCommand, RemotingCommand
from rocketspark.remoting import frame


def parse(data: bytes) -> RemotingCommand:
    """One whole frame back into a command, as a server or client reads it."""
    length, word = frame.PREFIX.unpack_from(data, 0)
    assert length == len(data) - 4
    header_bytes = frame.header_length(word)
    command = frame.decode_header(frame.serialization(word), data[8 : 8 + header_bytes])
    command.body = data[8 + header_bytes :]
    return command


@pytest.mark.parametrize("kind", [frame.MSGPACK, frame.JSON, frame.ROCKETMQ])
def test_a_command_survives_a_round_trip_in_each_serialization(kind: int) -> None:
    request = RemotingCommand.request(RequestCode.SEND_MESSAGE, {"topic": "t", "queueId": 3}, b"\x00body")
    request.serialize = kind
    decoded = parse(b"".join(frame.encode(request)))
    assert (decoded.code, decoded.opaque, decoded.body, decoded.serialize) == (10, request.opaque, b"\x00body", kind)
    # our own form keeps types; RocketMQ's forms carry every extFields value as text
    assert decoded.ext == ({"topic": "t", "queueId": 3} if kind == frame.MSGPACK else {"topic": "t", "queueId": "3"})
    response = decoded.response(ResponseCode.TOPIC_NOT_EXIST, remark="no such topic")
    assert response.serialize == kind  # answered in the serialization it came in
    back = parse(b"".join(frame.encode(response)))
    assert back.is_response and (back.code, back.remark, back.opaque) == (17, "no such topic", request.opaque)


def test_the_json_header_is_rocketmqs_and_reads_what_rocketmq_clients_send() -> None:
    command = RemotingCommand(105, opaque=3, ext={"topic": "T", "n": 1, "ok": True}, serialize=frame.JSON)
    data = b"".join(frame.encode(command))
    header = json.loads(data[8:])
    assert header == {
        "code": 105,
        "extFields": {"topic": "T", "n": "1", "ok": "true"},
        "flag": 0,
        "language": "PYTHON",
        "opaque": 3,
        "serializeTypeCurrentRPC": "JSON",
        "version": frame.VERSION,
    }
    # what ali-ons sends: numbers and booleans unquoted; a null remark
    sent = json.dumps(
        {
            "code": 310,
            "extFields": {"b": "T", "e": 1, "k": False},
            "flag": 0,
            "language": "JAVA",
            "opaque": 7,
            "remark": None,
            "version": 121,
        }
    ).encode()
    parsed = frame.decode_header(frame.JSON, sent)
    assert (parsed.code, parsed.ext, parsed.language, parsed.version) == (
        310,
        {"b": "T", "e": "1", "k": "false"},
        "JAVA",
        121,
    )


def test_the_binary_header_is_rocketmqs() -> None:
    ext = b"".join(
        struct.pack(">h", len(k)) + k + struct.pack(">i", len(v)) + v for k, v in ((b"topic", b"T"), (b"queueId", b"2"))
    )
    header = struct.pack(">hbhii", 105, 0, 409, 9, Flag.ONEWAY) + struct.pack(">i", 2) + b"hi"
    header += struct.pack(">i", len(ext)) + ext
    parsed = frame.decode_header(frame.ROCKETMQ, header)
    assert (parsed.code, parsed.opaque, parsed.flag, parsed.remark, parsed.version) == (105, 9, 2, "hi", 409)
    assert parsed.ext == {"topic": "T", "queueId": "2"} and parsed.is_oneway


@pytest.mark.parametrize(
    ("kind", "header", "fragment"),
    [
        (frame.MSGPACK, b"\xc1garbage", "not valid msgpack"),
        (frame.MSGPACK, msgpack.packb({"code": 10}), "must be an array"),
        (frame.MSGPACK, msgpack.packb(["10", 1, 0, "", {}]), "must be integers"),
        (frame.MSGPACK, msgpack.packb([10, 1, 0, "", []]), "ext a map"),
        (frame.JSON, b"{not json", "not valid JSON"),
        (frame.JSON, b'{"code": "105"}', 'integer "code"'),
        (frame.ROCKETMQ, b"\x00\x01", "not a valid ROCKETMQ binary header"),
        (frame.ROCKETMQ, struct.pack(">hbhii", 1, 0, 0, 1, 0) + struct.pack(">i", -5), "not a valid ROCKETMQ"),
        (7, b"{}", "unknown header serialization 7"),
    ],
)
def test_malformed_headers_are_rejected_with_a_reason(kind: int, header: bytes, fragment: str) -> None:
    with pytest.raises(MalformedCommand, match=fragment):
        frame.decode_header(kind, header)


def test_a_large_body_is_written_as_its_own_buffer_never_copied() -> None:
    body = b"b" * (1 << 20)
    parts = frame.encode(RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, {"topic": "t"}, body))
    assert len(parts) == 2 and parts[1] is body


def test_each_request_gets_a_new_opaque_and_oneway_is_a_bit_of_flag() -> None:
    assert RemotingCommand.request(1).opaque != RemotingCommand.request(1).opaque
    command = RemotingCommand(1, flag=Flag.ONEWAY)
    assert command.is_oneway and not command.is_response


def test_threads_encoding_at_once_each_get_their_own_header_whole() -> None:
    """Each thread packs headers with a packer of its own (``protocol.packing``): threads
    encoding at once get their own headers whole, and a header a packer cannot pack leaves
    the next one of that thread whole."""

    def encode_many(k: int) -> list[tuple[int, dict[str, object]]]:
        seen = []
        for i in range(2_000):
            ext: dict[str, object] = {"topic": f"t{k}", "queueId": i, "remark": "x" * (i % 300)}
            seen.append((k, parse(b"".join(frame.encode(RemotingCommand.request(RequestCode.SEND_MESSAGE, ext)))).ext))
        return seen

    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        results = [pool.submit(encode_many, k) for k in range(4)]
        for k, future in enumerate(results):
            got = future.result()
            assert [ext for _, ext in got] == [
                {"topic": f"t{k}", "queueId": i, "remark": "x" * (i % 300)} for i in range(2_000)
            ]
    with pytest.raises(TypeError):
        frame.encode(RemotingCommand.request(RequestCode.SEND_MESSAGE, {"topic": {1, 2}}))  # a set has no msgpack form
    assert parse(b"".join(frame.encode(RemotingCommand.request(RequestCode.SEND_MESSAGE, {"topic": "t"})))).ext == {
        "topic": "t"
    }
