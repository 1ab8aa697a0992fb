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
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import dataclass

import pyarrow as pa

from rocketspark.errors import ConnectError, DataCorruptedError, RocketSparkError
from rocketspark.protocol.codec import unpack
from rocketspark.protocol.codes import RequestCode, ResponseCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.record import RecordCorrupted
from rocketspark.remoting.client import RemotingClient, check
from rocketspark.spark.arrow import Source, arrow_schema, to_record_batch
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
    """Everything an executor needs, as plain data (it travels inside the partition)."""

    topic: str
    queue_id: int  # logical
    nameservers: tuple[str, ...]
    tags: tuple[str, ...] | None
    include_properties: bool
    fail_on_data_loss: bool
    verify_crc: bool
    pull_timeout_ms: int
    pull_batch_size: int


def _request(spec: ReadSpec, r: SegmentRange, offset: int) -> RemotingCommand:
    ext: dict[str, object] = {
        "topic": spec.topic,
        "queueId": r.queue_id,
        "queueOffset": offset,
        "maxMsgNums": min(spec.pull_batch_size, r.end - offset),
        "endOffset": r.end,
    }
    if r.static:
        ext.update(logicQueueId=spec.queue_id, gen=r.gen, epoch=r.epoch)
    if spec.tags:
        ext["tags"] = list(spec.tags)
    return RemotingCommand.request(RequestCode.PULL_MESSAGE, ext)


def _lost(spec: ReadSpec, r: SegmentRange, start: int, end: int, why: str) -> None:
    lo, hi = start + r.offset_delta, end + r.offset_delta
    message = (
        f"data loss in topic {spec.topic} logical queue {spec.queue_id}: offsets [{lo}, {hi}) ({hi - lo} messages) "
        f"are no longer on broker {r.broker_name} ({why})"
    )
    if spec.fail_on_data_loss:
        raise DataLossError(message + '. Set the option failOnDataLoss to "false" to skip lost offsets instead.')
    log.warning("%s; skipped (failOnDataLoss=false)", message)


def _broker_address(spec: ReadSpec, broker_name: str) -> str | None:
    """Ask a nameserver where a broker is now (it may have restarted on another port)."""
    for nameserver in spec.nameservers:
        try:
            request = RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO)
            info = unpack(check(client().invoke(nameserver, request, peer="nameserver")).body)
        except RocketSparkError:
            continue
        address = info["brokers"].get(broker_name, {}).get("addr")
        if address:
            return str(address)
    return None


def read_range(spec: ReadSpec, r: SegmentRange) -> Iterator[pa.RecordBatch]:
    """Every record of one segment slice, as RecordBatches, with the next pull in flight."""
    schema = arrow_schema(spec.include_properties)
    source = Source(spec.topic, spec.queue_id, r.offset_delta, r.broker_name)
    address = r.address or _broker_address(spec, r.broker_name)
    if address is None:
        raise ConnectError(f"broker {r.broker_name} holding {spec.topic} queue {spec.queue_id} is not registered")
    remoting = client()
    offset = r.start
    retried = False
    pending: Future[RemotingCommand] = remoting.invoke_async(address, _request(spec, r, offset), spec.pull_timeout_ms)
    while offset < r.end:
        try:
            response = pending.result()
        except ConnectError:
            moved = None if retried else _broker_address(spec, r.broker_name)
            if moved is None:
                raise
            address, retried = moved, True
            pending = remoting.invoke_async(address, _request(spec, r, offset), spec.pull_timeout_ms)
            continue
        code = response.code
        check(
            response, ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_RETRY_IMMEDIATELY, ResponseCode.PULL_OFFSET_MOVED
        )
        nxt = int(response.ext["next"])
        if code in (ResponseCode.SUCCESS, ResponseCode.PULL_RETRY_IMMEDIATELY) and offset < nxt < r.end:
            pending = remoting.invoke_async(address, _request(spec, r, nxt), spec.pull_timeout_ms)
        if code == ResponseCode.SUCCESS:
            try:
                batch = to_record_batch(response.body, source, schema, verify=spec.verify_crc)
            except RecordCorrupted as exc:
                raise DataCorruptedError(
                    f"a record of {spec.topic} queue {spec.queue_id} from broker {r.broker_name} failed its integrity "
                    f"check: {exc}; the broker's copy is damaged"
                ) from None
            if batch.num_rows:
                yield batch
        elif code == ResponseCode.PULL_OFFSET_MOVED and nxt > offset:
            _lost(spec, r, offset, min(nxt, r.end), "deleted by retention")
        elif code != ResponseCode.PULL_RETRY_IMMEDIATELY:
            _lost(spec, r, offset, r.end, "the broker has fewer messages than planned")
            return
        if nxt <= offset:
            return
        offset = nxt
        if offset < r.end and code not in (ResponseCode.SUCCESS, ResponseCode.PULL_RETRY_IMMEDIATELY):
            pending = remoting.invoke_async(address, _request(spec, r, offset), spec.pull_timeout_ms)


def read_partition(spec: ReadSpec, ranges: list[SegmentRange]) -> Iterator[pa.RecordBatch]:
    for r in ranges:
        yield from read_range(spec, r)
