"""Small helpers for tests."""

from __future__ import annotations

import pathlib
import socket
import struct
import threading
import time
import zlib
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

from broker.store.store import MessageStore
from broker.store.values import PutResult
from rocketspark.codec.build import Idempotence, build_section, encode_batch, tag_summary_of
from rocketspark.codec.columns import decode
from rocketspark.codec.ids import store_host
from rocketspark.codec.layout import BODY_AT, BODY_CRC_AT, HEADER_SIZE, V2, V2_HEADER_SIZE
from rocketspark.codec.messages import to_messages
from rocketspark.protocol.bodies import unpack
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.types import MessageExt
from rocketspark.remoting import frame

DOCS = pathlib.Path(__file__).resolve().parents[1] / "docs"


def docs_text(page: str) -> str:
    """The text of a page of the docs site, by its path under docs/ (``"security.md"``)."""
    return (DOCS / page).read_text()


def frame_bytes(command: RemotingCommand) -> bytes:
    """A command as one remoting frame on the wire."""
    return b"".join(frame.encode(command))


def raw_exchange(address: str, data: bytes, timeout_s: float = 10) -> RemotingCommand | None:
    """Write raw bytes to a server's remoting port and read its one answer; None when the
    server closed the connection instead (what it does with a frame it cannot parse)."""
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout_s) as sock:
        sock.sendall(data)
        received = b""
        while len(received) < frame.PREFIX_BYTES or len(received) < 4 + frame.PREFIX.unpack_from(received, 0)[0]:
            chunk = sock.recv(65536)
            if not chunk:
                return None
            received += chunk
    length, word = frame.PREFIX.unpack_from(received, 0)
    header = frame.header_length(word)
    command = frame.decode_header(frame.serialization(word), received[8 : 8 + header])
    command.body = received[8 + header : 4 + length]
    return command


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def eventually(check: Callable[[], Any], timeout_s: float = 10.0, interval_s: float = 0.05) -> Any:
    """Retry ``check`` until it returns a truthy value or stops raising AssertionError."""
    deadline = time.monotonic() + timeout_s
    last: BaseException | None = None
    while time.monotonic() < deadline:
        try:
            value = check()
            if value:
                return value
        except AssertionError as exc:
            last = exc
        time.sleep(interval_s)
    if last is not None:
        raise last
    raise AssertionError(f"condition not met within {timeout_s}s")


def batch_record(
    topic: str,
    bodies: Sequence[bytes],
    tags: Sequence[str | None] | str | None = None,
    *,
    compression: int = 0,
    idempotence: Idempotence | None = None,
) -> bytes:
    """A batch record of ``bodies`` as a producer sends it (``tags``: one for all, or one each)."""
    each = [tags] * len(bodies) if tags is None or isinstance(tags, str) else list(tags)
    section = build_section(list(bodies), each, [b""] * len(bodies))
    return encode_batch(topic.encode(), section, compression_kind=compression, idempotence=idempotence)


def put_batch(
    store: MessageStore,
    topic: str,
    queue_id: int,
    bodies: Sequence[bytes],
    tags: Sequence[str | None] | str | None = None,
) -> PutResult:
    """Store one batch record of ``bodies`` as the send handler does."""
    record = batch_record(topic, bodies, tags)
    return store.put(topic, queue_id, record, len(bodies), tag_summary_of(record))


def as_version_2(record: bytes) -> bytes:
    """A sent record as rocketspark wrote it before client ids: layout version 2, whose header
    has no first id (its topic starts at byte 92)."""
    head = bytearray(record[:V2_HEADER_SIZE])
    head[BODY_AT] = V2  # the version, the first byte under the body CRC
    out = bytearray(head + record[HEADER_SIZE:])
    struct.pack_into(">I", out, 0, len(out))
    struct.pack_into(">I", out, BODY_CRC_AT, zlib.crc32(out[BODY_AT:]))
    return bytes(out)


def decode_messages(body: bytes, topic: str = "t", broker: str = "b") -> list[MessageExt]:
    """The messages of a pull response's records, as a consumer sees them (read from a broker
    at 127.0.0.1:10911, as far as their offset ids tell)."""
    return to_messages(decode(body), topic, broker, store_host("127.0.0.1:10911"))


class Registrations:
    """A broker's nameservers, as the ``Transport`` its registry calls them through: every
    request succeeds, after ``delay_s`` (a nameserver round trip), and each REGISTER_BROKER's
    ``changed`` topics (None for a full registration) are recorded once it is answered."""

    def __init__(self, delay_s: float = 0.0) -> None:
        self.delay_s = delay_s
        self.changed: list[list[str] | None] = []
        self._lock = threading.Lock()

    def invoke(self, address: str, request: RemotingCommand, timeout_ms: int | None = None) -> RemotingCommand:
        time.sleep(self.delay_s)
        if request.code == RequestCode.REGISTER_BROKER:
            with self._lock:
                self.changed.append(unpack(request.body).get("changed"))
        return request.response()

    def invoke_async(
        self, address: str, request: RemotingCommand, timeout_ms: int | None = None
    ) -> Future[RemotingCommand]:
        future: Future[RemotingCommand] = Future()
        future.set_result(self.invoke(address, request, timeout_ms))
        return future
