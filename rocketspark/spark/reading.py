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
import pyarrow.compute as pc

from rocketspark.client.admin import Admin
from rocketspark.client.pulling import segment_request_ext
from rocketspark.errors import ConnectError, DataCorruptedError, RocketSparkError
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


def _exact_tags(batch: pa.RecordBatch, tags: pa.Array) -> pa.RecordBatch:
    """The broker filters by the tags' CRC32 hashes, which can collide (``plumless`` and
    ``buckeroo`` share one): only rows whose tag is one of the wanted ones are kept."""
    return batch.filter(pc.is_in(batch.column("tag"), value_set=tags))


def read_range(spec: ReadSpec, r: SegmentRange) -> Iterator[pa.RecordBatch]:
    """Every record of one segment slice, as RecordBatches, with the next pull in flight."""
    topic, segment = r.queue.topic, r.segment
    schema = arrow_schema(spec.include_properties)
    source = Source(topic, r.queue.queue_id, r.offset_delta, segment.broker_name)
    wanted = pa.array(spec.tags, pa.string()) if spec.tags else None
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
            try:
                batch = to_record_batch(response.body, source, schema, verify=spec.verify_crc)
            except RecordCorrupted as exc:
                raise DataCorruptedError(
                    f"a record of {topic} queue {r.queue.queue_id} from broker {segment.broker_name} failed its "
                    f"integrity check: {exc}; the broker's copy is damaged"
                ) from None
            if wanted is not None:
                batch = _exact_tags(batch, wanted)
            if batch.num_rows:
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
