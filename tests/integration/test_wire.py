"""RocketMQ's remoting frames on a real broker: a stranger announcing a huge request holds
nothing, a JSON header (what 4.x clients send) is read and answered in JSON, and one
connection carries a client's every request."""

from __future__ import annotations

import json
import socket
import struct
import time
from collections.abc import Callable

import msgpack
import pytest

from rocketspark import Admin, LocalCluster, Message, Producer
from rocketspark.protocol.codes import RequestCode, ResponseCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.remoting import frame
from tests.helpers import raw_exchange

pytestmark = pytest.mark.integration
ANNOUNCED = 200 * 1024 * 1024


def announce(address: str, ext: dict[str, object], first: bytes = b"") -> socket.socket:
    """Open a connection and send the header of a SEND_MESSAGE announcing ANNOUNCED bytes of
    body, then ``first`` of them; the caller decides whether to send more."""
    header = msgpack.packb([RequestCode.SEND_MESSAGE, 1, 0, "", ext])
    host, port = address.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=30)
    sock.sendall(struct.pack(">iI", 4 + len(header) + ANNOUNCED, (frame.MSGPACK << 24) | len(header)) + header + first)
    return sock


def closed(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def test_a_stalled_announcement_of_200_mib_is_cut_off_and_large_sends_of_others_go_through(
    make_cluster: Callable[..., LocalCluster], topic_name: str
) -> None:
    cluster = make_cluster(brokers=1, broker_config={"max_inflight_request_bytes": 64 * 1024 * 1024})
    with Admin(cluster.nameserver) as admin:
        admin.create_topic(topic_name, queues=1)
    broker = cluster.brokers["broker-a"]
    stalled = announce(broker, {"topic": topic_name}, b"x" * (1024 * 1024))  # then nothing more
    try:
        started = time.monotonic()
        with Producer(cluster.nameserver, send_timeout_ms=30_000) as producer:
            results = producer.send_batch([Message(topic_name, b"y" * 1024) for _ in range(4 * 1024)])
        assert sum(r.count for r in results) == 4 * 1024  # 4 MiB of others' sends, stored
        assert closed(stalled)  # the broker cut the staller off
        assert time.monotonic() - started < 30  # a generous bound: the stall deadline is 5 s
    finally:
        stalled.close()


def test_an_unsigned_announcement_is_refused_from_its_header_and_holds_nothing(
    make_cluster: Callable[..., LocalCluster], topic_name: str
) -> None:
    cluster = make_cluster(brokers=1, auth=True, broker_config={"max_inflight_request_bytes": 64 * 1024 * 1024})
    with Admin(cluster.nameserver, **cluster.client_options) as admin:
        admin.create_topic(topic_name, queues=1)
    sock = announce(cluster.brokers["broker-a"], {"topic": topic_name})
    try:
        data = sock.recv(65536)  # the refusal, before a byte of the body was sent
        _, word = frame.PREFIX.unpack_from(data, 0)
        refusal = frame.decode_header(frame.serialization(word), data[8 : 8 + frame.header_length(word)])
        assert refusal.code == ResponseCode.NO_PERMISSION and "not signed" in refusal.remark
        with Producer(cluster.nameserver, **cluster.client_options) as producer:  # the budget is whole
            big = [Message(topic_name, b"z" * (1024 * 1024)) for _ in range(3)]  # one 3 MiB batch
            assert sum(r.count for r in producer.send_batch(big, timeout_ms=1000)) == 3
    finally:
        sock.close()


def test_a_request_with_rocketmqs_json_header_is_answered_in_json(shared_cluster: LocalCluster) -> None:
    """What a 4.x client sends (the request codes it needs are the next issue's)."""
    header = json.dumps(
        {
            "code": RequestCode.GET_BROKER_CLUSTER_INFO,
            "extFields": {},
            "flag": 0,
            "language": "JAVA",
            "opaque": 7,
            "serializeTypeCurrentRPC": "JSON",
            "version": 409,
        }
    ).encode()
    data = struct.pack(">iI", 4 + len(header), (frame.JSON << 24) | len(header)) + header
    answer = raw_exchange(shared_cluster.nameserver, data)
    assert answer is not None and answer.serialize == frame.JSON and answer.opaque == 7
    assert answer.code == ResponseCode.SUCCESS and answer.is_response


def test_a_client_holds_one_connection_per_server_however_many_threads_send(
    shared_cluster: LocalCluster, topic_name: str
) -> None:
    import concurrent.futures

    with Admin(shared_cluster.nameserver) as admin:
        admin.create_topic(topic_name, queues=2, brokers=["broker-a"])
    with Producer(shared_cluster.nameserver) as producer:
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            sent = list(pool.map(lambda i: producer.send(Message(topic_name, b"%d" % i)), range(400)))
        assert len({(r.queue_id, r.queue_offset) for r in sent}) == 400
        peers = producer.remoting.connected_peers  # one connection each to the nameserver and the broker
        assert sorted(peers) == sorted({shared_cluster.nameserver, shared_cluster.brokers["broker-a"]})


def test_the_request_codes_of_the_wire_refuse_what_they_do_not_serve(shared_cluster: LocalCluster) -> None:
    answer = raw_exchange(shared_cluster.nameserver, b"".join(frame.encode(RemotingCommand.request(4242))))
    assert answer is not None and answer.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert "4242 is not supported by nameserver" in answer.remark
