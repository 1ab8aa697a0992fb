"""Executor side of the source: read a planned partition, straight from each segment's broker.

Runs in Spark's Python workers. The remoting client is created there, once per process
(``fork`` leaves no usable gRPC channel behind), and reused by every task the worker runs.
A partition is read exactly as planned: the same physical slices, whatever remaps happened
since, so a replayed micro-batch yields the same rows. Data missing from a planned slice
(retention deleted it, a broker lost it) is data loss: with ``failOnDataLoss`` it fails the
query naming the queue and the lost range, otherwise exactly that range is skipped.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa

from rocketspark.client.admin import Admin
from rocketspark.client.logical import SegmentRange
from rocketspark.client.pipeline import Pipeline
from rocketspark.client.pulling import STATUS_CODES, PullPlan, next_logical, plan_pull, read_columns
from rocketspark.codec import ids
from rocketspark.codec.arrow import to_record_batch
from rocketspark.codec.source import Source
from rocketspark.errors import ConnectError, RocketSparkError
from rocketspark.filtering import compile_cached
from rocketspark.protocol.codes import ResponseCode
from rocketspark.protocol.types import PullResult
from rocketspark.remoting.client import RemotingClient, check
from rocketspark.remoting.transport import Transport
from rocketspark.security.client_side import ClientSecurity
from rocketspark.spark.arrow import arrow_schema
from rocketspark.spark.connection import Connection
from rocketspark.spark.data_loss import lost

log = logging.getLogger(__name__)

_lock = threading.Lock()
_clients: dict[tuple[int, Connection], RemotingClient] = {}


def client(connection: Connection) -> RemotingClient:
    """This process's client for ``connection`` (new ones after a fork)."""
    key = (os.getpid(), connection)
    with _lock:
        found = _clients.get(key)
        if found is None:
            security = ClientSecurity.of(connection.client_kwargs())
            found = _clients[key] = RemotingClient(
                peer_kind="broker", credentials=security.credentials, tls=security.tls
            )
        return found


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
    connection: Connection
    sql: str | None = None  # an SQL92 filter (checked when the query started)


def _lost(spec: ReadSpec, r: SegmentRange, lo: int, hi: int, why: str) -> None:
    """Logical ``[lo, hi)`` of the planned range cannot be read: fail, or skip it."""
    what = f"({hi - lo} messages) are no longer on broker {r.segment.broker_name} ({why})"
    lost(spec.fail_on_data_loss, r.queue.topic, r.queue.queue_id, lo, hi, what, log)


def _broker_address(spec: ReadSpec, broker_name: str) -> str | None:
    """Ask a nameserver where a broker is now (it may have restarted on another port, or its
    replica group have a new master; a group without one is read from a live slave). Rare:
    only when the planned address fails or was unknown, so a short-lived admin client will do."""
    try:
        with Admin(
            list(spec.nameservers), timeout_ms=spec.pull_timeout_ms, route_push=False, **spec.connection.client_kwargs()
        ) as admin:
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
    times faster than small ones. What lies outside the planned range or the tag filter is
    dropped by the pipeline's one decoder (``read_columns``)."""

    def __init__(self, spec: ReadSpec, r: SegmentRange) -> None:
        self.spec, self.r = spec, r
        self.source = Source(r.queue.topic, r.queue.queue_id, r.offset_delta, r.segment.broker_name)
        self.schema = arrow_schema(spec.include_properties)
        self.first: PullPlan | None = None  # the pull the bodies held start with
        self.bodies: list[bytes] = []
        self.rows = 0

    def add(self, plan: PullPlan, body: bytes, count: int) -> pa.RecordBatch | None:
        self.first = self.first or plan
        self.bodies.append(body)
        self.rows += count
        return self.flush() if self.rows >= MIN_ARROW_ROWS else None

    def flush(self) -> pa.RecordBatch | None:
        if self.first is None:
            return None
        body = self.bodies[0] if len(self.bodies) == 1 else b"".join(self.bodies)
        plan = self.first
        columns = read_columns(plan, body, verify=self.spec.verify_crc, end=self.r.logical_end)
        self.first, self.bodies, self.rows = None, [], 0
        source = dataclasses.replace(self.source, host=ids.store_host(plan.address))  # offset ids name it
        batch = to_record_batch(columns, source, self.schema)
        return batch if batch.num_rows else None


def read_range(spec: ReadSpec, r: SegmentRange, transport: Transport | None = None) -> Iterator[pa.RecordBatch]:
    """Every message of one segment slice, as RecordBatches, through the pull pipeline
    (over this process's client unless a ``transport`` is given)."""
    decoder = _Decoder(spec, r)
    yield from _pull_range(spec, r, decoder, transport or client(spec.connection))
    last = decoder.flush()
    if last is not None:
        yield last


class _Planned:
    """Where the pulls of a planned slice go: always the planned segment, at the address the
    plan knew, or where the nameserver says its broker is now. A broker that cannot be
    reached is looked up again for up to ``pullTimeoutMs`` (it restarted elsewhere, or its
    replica group is electing a master: that takes the controller's heartbeat timeout)."""

    def __init__(self, spec: ReadSpec, r: SegmentRange) -> None:
        self.spec, self.r = spec, r
        segment = r.segment
        # The planned address, else the nameserver's; else require_address raises naming the broker.
        self.address = (
            segment.address or _broker_address(spec, segment.broker_name) or segment.require_address(r.queue.topic)
        )
        self.give_up = 0.0  # while the broker cannot be reached: when to stop looking for it

    def plan_at(self, offset: int) -> PullPlan | PullResult:
        spec, r = self.spec, self.r
        planned = plan_pull(
            r.queue,
            offset,
            spec.pull_batch_size,
            end=r.logical_end,
            wanted=list(spec.tags) if spec.tags else None,
            selector=compile_cached(spec.sql) if spec.sql else None,
            timeout_ms=spec.pull_timeout_ms,
        )
        if not isinstance(planned, PullPlan):
            return planned
        planned.request.ext["via"] = "spark"  # as message trace names the delivery
        return dataclasses.replace(planned, address=self.address)

    def recover(self, plan: PullPlan, exc: ConnectError) -> PullPlan:
        self.give_up = self.give_up or time.monotonic() + self.spec.pull_timeout_ms / 1000
        if time.monotonic() > self.give_up:
            raise exc
        time.sleep(0.5)  # each look is a nameserver query from a fresh admin client
        self.address = _broker_address(self.spec, self.r.segment.broker_name) or self.address
        return dataclasses.replace(plan, address=self.address)

    def reached(self) -> None:
        self.give_up = 0.0


def _pull_range(spec: ReadSpec, r: SegmentRange, decoder: _Decoder, transport: Transport) -> Iterator[pa.RecordBatch]:
    planned = _Planned(spec, r)
    end = r.logical_end
    pipeline = Pipeline(transport, planned.plan_at, end=end, recover=planned.recover)
    offset = r.logical_start
    while offset < end:
        pulled = pipeline.pull(offset)
        if isinstance(pulled, PullResult):  # the planned segment is always asked
            raise RocketSparkError(f"internal: no pull planned for {r.queue.topic} offset {offset} ({pulled.status})")
        planned.reached()
        plan, response = pulled
        code = response.code
        check(response, *STATUS_CODES)
        nxt = next_logical(plan, int(response.ext["next"]))
        if code == ResponseCode.SUCCESS:
            batch = decoder.add(plan, response.body, min(nxt, end) - offset)
            if batch is not None:
                yield batch
        elif code == ResponseCode.PULL_OFFSET_MOVED and nxt > offset:
            _lost(spec, r, offset, min(nxt, end), "deleted by retention")
        elif code != ResponseCode.PULL_RETRY_IMMEDIATELY:
            _lost(spec, r, offset, end, "the broker has fewer messages than planned")
            return
        if nxt <= offset:  # no progress: what is left of the planned range cannot be read
            _lost(spec, r, offset, end, f"the broker's answer (code {code}) did not move past offset {offset}")
            return
        offset = nxt
