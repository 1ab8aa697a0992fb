"""Executor side of the source: read a planned partition, straight from each segment's broker.

Runs in Spark's Python workers. The remoting client is created there, once per process
(``fork`` leaves no usable gRPC channel behind), and reused by every task the worker runs.
A partition is read exactly as planned: the same physical slices, whatever remaps happened
since, so a replayed micro-batch yields the same rows. Data missing from a planned slice
(retention deleted it, a broker lost it) is data loss: with ``failOnDataLoss`` it fails the
query naming the queue and the lost range, otherwise exactly that range is skipped.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import dataclass

import pyarrow as pa

from rocketspark.client.admin import Admin
from rocketspark.client.pulling import segment_request_ext
from rocketspark.codec.arrow import Source, to_record_batch
from rocketspark.codec.columns import decode
from rocketspark.codec.layout import RecordCorrupted
from rocketspark.errors import ConnectError, DataCorruptedError, RocketSparkError
from rocketspark.protocol.codes import RequestCode, ResponseCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.remoting.client import RemotingClient, check
from rocketspark.spark.arrow import arrow_schema
from rocketspark.spark.planning import SegmentRange

log = logging.getLogger(__name__)

_lock = threading.Lock()
_client: tuple[int, RemotingClient] | None = None


def client() -> RemotingClient:
    """This process's client (a new one after a fork)."""
    global _client
    with _lock:
        if _client is None or _client[0] != os.getpid():
            _client = (os.getpid(), RemotingClient(peer_kind="broker"))
        return _client[1]


class DataLossError(RocketSparkError):
    """Planned offsets are gone (retention, deletion or a lost broker); see failOnDataLoss."""

    code = 10008


@dataclass(frozen=True, slots=True)
class ReadSpec:
    """The query's read options an executor needs, as plain data (it travels in each partition)."""

    nameservers: tuple[str, ...]
    tags: tuple[str, ...] | None
    include_properties: bool
    fail_on_data_loss: bool
    verify_crc: bool
    pull_timeout_ms: int
    pull_batch_size: int


def _request(spec: ReadSpec, r: SegmentRange, offset: int) -> RemotingCommand:
    ext = segment_request_ext(r.queue, r.segment)
    ext.update(queueOffset=offset, maxMsgNums=min(spec.pull_batch_size, r.end - offset), endOffset=r.end)
    if spec.tags:
        ext["tags"] = list(spec.tags)
    return RemotingCommand.request(RequestCode.PULL_MESSAGE, ext)


def _lost(spec: ReadSpec, r: SegmentRange, start: int, end: int, why: str) -> None:
    lo, hi = start + r.offset_delta, end + r.offset_delta
    message = (
        f"data loss in topic {r.queue.topic} logical queue {r.queue.queue_id}: offsets [{lo}, {hi}) ({hi - lo} "
        f"messages) are no longer on broker {r.segment.broker_name} ({why})"
    )
    if spec.fail_on_data_loss:
        raise DataLossError(message + '. Set the option failOnDataLoss to "false" to skip lost offsets instead.')
    log.warning("%s; skipped (failOnDataLoss=false)", message)


def _broker_address(spec: ReadSpec, broker_name: str) -> str | None:
    """Ask a nameserver where a broker is now (it may have restarted on another port, or its
    replica group have a new master; a group without one is read from a live slave). Rare:
    only when the planned address fails or was unknown, so a short-lived admin client will do."""
    try:
        with Admin(list(spec.nameservers), timeout_ms=spec.pull_timeout_ms, route_push=False) as admin:
            entry = admin.cluster_list()["brokers"].get(broker_name)
    except RocketSparkError:
        return None
    if not entry:
        return None
    address: str | None = entry["addr"] or next(iter(entry.get("replicas", ())), None)
    return address


MIN_ARROW_ROWS = 32_768  # pulled batches are decoded together until they hold this many rows


class _Decoder:
    """Pull responses, decoded together into RecordBatches of at least ``MIN_ARROW_ROWS``
    rows where the range allows: the Data Source API carries large Arrow batches several
    times faster than small ones. Whole batch records come back from a pull, so what lies
    outside the planned range, or outside the tag filter (the broker filters by summary), is
    dropped here, with numpy."""

    def __init__(self, spec: ReadSpec, r: SegmentRange) -> None:
        self.spec, self.r = spec, r
        self.source = Source(r.queue.topic, r.queue.queue_id, r.offset_delta, r.segment.broker_name)
        self.schema = arrow_schema(spec.include_properties)
        self.bodies: list[bytes] = []
        self.rows = 0

    def add(self, body: bytes, count: int) -> pa.RecordBatch | None:
        self.bodies.append(body)
        self.rows += count
        return self.flush() if self.rows >= MIN_ARROW_ROWS else None

    def flush(self) -> pa.RecordBatch | None:
        if not self.bodies:
            return None
        body = self.bodies[0] if len(self.bodies) == 1 else b"".join(self.bodies)
        self.bodies, self.rows = [], 0
        r = self.r
        try:
            columns = decode(body, verify=self.spec.verify_crc).select(r.start, r.end, list(self.spec.tags or ()))
        except RecordCorrupted as exc:
            raise DataCorruptedError(
                f"a record of {r.queue.topic} queue {r.queue.queue_id} from broker {r.segment.broker_name} failed "
                f"its integrity check: {exc}; the broker's copy is damaged"
            ) from None
        batch = to_record_batch(columns, self.source, self.schema)
        return batch if batch.num_rows else None


def read_range(spec: ReadSpec, r: SegmentRange) -> Iterator[pa.RecordBatch]:
    """Every message of one segment slice, as RecordBatches, with the next pull in flight."""
    decoder = _Decoder(spec, r)
    yield from _pull_range(spec, r, decoder)
    last = decoder.flush()
    if last is not None:
        yield last


def _pull_range(spec: ReadSpec, r: SegmentRange, decoder: _Decoder) -> Iterator[pa.RecordBatch]:
    topic, segment = r.queue.topic, r.segment
    # The planned address, else the nameserver's; else require_address raises naming the broker.
    address = segment.address or _broker_address(spec, segment.broker_name) or segment.require_address(topic)
    remoting = client()
    offset = r.start
    give_up = 0.0  # while a broker cannot be reached: when to stop looking for where it went
    pending: Future[RemotingCommand] = remoting.invoke_async(address, _request(spec, r, offset), spec.pull_timeout_ms)
    while offset < r.end:
        try:
            response = pending.result()
        except ConnectError:
            # Gone: restarted elsewhere, or its group is electing a master. Look again, for up
            # to pullTimeoutMs (a failover takes the controller's heartbeat timeout).
            give_up = give_up or time.monotonic() + spec.pull_timeout_ms / 1000
            if time.monotonic() > give_up:
                raise
            time.sleep(0.5)  # each look is a nameserver query from a fresh admin client
            address = _broker_address(spec, segment.broker_name) or address
            pending = remoting.invoke_async(address, _request(spec, r, offset), spec.pull_timeout_ms)
            continue
        give_up = 0.0
        code = response.code
        check(
            response, ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_RETRY_IMMEDIATELY, ResponseCode.PULL_OFFSET_MOVED
        )
        nxt = int(response.ext["next"])
        if code in (ResponseCode.SUCCESS, ResponseCode.PULL_RETRY_IMMEDIATELY) and offset < nxt < r.end:
            pending = remoting.invoke_async(address, _request(spec, r, nxt), spec.pull_timeout_ms)
        if code == ResponseCode.SUCCESS:
            batch = decoder.add(response.body, nxt - offset)
            if batch is not None:
                yield batch
        elif code == ResponseCode.PULL_OFFSET_MOVED and nxt > offset:
            _lost(spec, r, offset, min(nxt, r.end), "deleted by retention")
        elif code != ResponseCode.PULL_RETRY_IMMEDIATELY:
            _lost(spec, r, offset, r.end, "the broker has fewer messages than planned")
            return
        if nxt <= offset:  # no progress: what is left of the planned range cannot be read
            _lost(spec, r, offset, r.end, f"the broker's answer (code {code}) did not move past offset {offset}")
            return
        offset = nxt
        if offset < r.end and code not in (ResponseCode.SUCCESS, ResponseCode.PULL_RETRY_IMMEDIATELY):
            pending = remoting.invoke_async(address, _request(spec, r, offset), spec.pull_timeout_ms)
