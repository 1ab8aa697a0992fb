"""The sink: streaming and batch writers of ``format("rocketmq")``.

Columns (names case-insensitive): ``body`` or ``value`` (binary or string; required),
``topic`` (string; or the ``topic`` option, which wins, as in Kafka's sink), ``tag``,
``keys`` (string or array of strings), ``properties`` (map of strings), ``queueId`` (int:
the logical queue) and ``shardingKey`` (string: same key, same queue). Anything else is an
error, so a typo does not silently drop data.

Guarantee. Each task waits until the broker acknowledged every message before it reports
success. In a streaming query the writes are idempotent per micro-batch: a task numbers its
messages per queue under a stable identity (query id, batch id, partition), and the broker
drops messages it already stored under that identity. So when Spark re-runs a micro-batch
(after a failure, or after a restart from a checkpoint whose commit was not recorded), the
topic gets each message of the batch once, provided the re-run produces the same rows in the
same order per partition (a deterministic query over a replayable source, like this one).
Messages without a ``queueId`` or ``shardingKey`` go to queue ``row number % queues`` for the
same reason. A broker remembers identities for ``dedupe_retention_hours`` (24 h) and saves
them every second; a re-run after a broker crash can duplicate what that broker stored in
its last second. Batch writes (``df.write``) are at-least-once.
"""

from __future__ import annotations

import concurrent.futures
import logging
import os
import threading
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, LongType, MapType, StringType, StructType

from rocketspark.client.producer import Producer
from rocketspark.protocol import record
from rocketspark.protocol.record import encode_payload
from rocketspark.spark.options import OptionError, WriterOptions

log = logging.getLogger(__name__)

COLUMNS = ("body", "value", "topic", "tag", "keys", "properties", "queueid", "shardingkey")


@dataclass
class SinkCommitMessage(WriterCommitMessage):
    partition: int
    messages: int
    duplicates: int


def check_schema(schema: StructType, options: WriterOptions) -> dict[str, str]:
    """The input columns the sink uses, by role; fails on anything unknown or mistyped."""
    roles: dict[str, str] = {}
    for field in schema.fields:
        name = field.name.lower()
        if name not in COLUMNS:
            raise OptionError(
                f'the rocketmq sink does not know the column "{field.name}"; it writes body (or value), topic, tag, '
                "keys, properties, queueId and shardingKey: select or rename columns first"
            )
        roles[name] = field.name
        kind = field.dataType
        expected: tuple[type, ...] = {
            "body": (BinaryType, StringType),
            "value": (BinaryType, StringType),
            "topic": (StringType,),
            "tag": (StringType,),
            "keys": (StringType, ArrayType),
            "properties": (MapType,),
            "queueid": (IntegerType, LongType),
            "shardingkey": (StringType,),
        }[name]
        if not isinstance(kind, expected):
            raise OptionError(
                f'column "{field.name}" has type {kind.simpleString()}; the rocketmq sink needs '
                + " or ".join(t.__name__.replace("Type", "").lower() for t in expected)
            )
    if "body" in roles and "value" in roles:
        raise OptionError('columns "body" and "value" are both present; the message body must come from one of them')
    if "body" not in roles and "value" not in roles:
        raise OptionError('the rocketmq sink needs a "body" (or "value") column with the message bodies')
    if options.topic is None and "topic" not in roles:
        raise OptionError('set the option "topic" or give the rows a "topic" column')
    return roles


_lock = threading.Lock()
_producers: dict[tuple[int, WriterOptions], Producer] = {}


def producer_for(options: WriterOptions) -> Producer:
    """One producer per worker process and configuration, reused across tasks."""
    key = (os.getpid(), options)
    with _lock:
        producer = _producers.get(key)
        if producer is None:
            producer = _producers[key] = Producer(
                list(options.nameservers),
                send_timeout_ms=options.send_timeout_ms,
                retry_times_when_send_failed=options.retry_times,
                batch_max_bytes=options.batch_max_bytes,
            )
        return producer


def _as_bytes(value: Any) -> bytes:
    if value is None:
        return b""
    return value.encode() if isinstance(value, str) else bytes(value)


class _Batcher:
    """Collects encoded messages per (topic, queue) in row order, with their sequence numbers."""

    def __init__(self, producer: Producer, options: WriterOptions, roles: dict[str, str]) -> None:
        self.producer = producer
        self.options = options
        self.roles = roles
        self.queues: dict[tuple[str, int], list[bytes]] = {}
        self.rows = 0
        self._counts: dict[str, int] = {}

    def _queue_count(self, topic: str) -> int:
        count = self._counts.get(topic)
        if count is None:
            count = self._counts[topic] = self.producer.queue_count(topic)
        return count

    def add(self, batch: pa.RecordBatch) -> None:
        if self.options.topic is not None and set(self.roles) <= {"body", "value", "tag"}:
            self._add_simple(batch)  # the common shape, encoded column-wise in C
            return
        roles, opts = self.roles, self.options
        cols = {role: batch.column(name).to_pylist() for role, name in roles.items()}
        bodies = cols.get("body", cols.get("value"))
        assert bodies is not None
        topics = cols.get("topic")
        tags = cols.get("tag")
        keys = cols.get("keys")
        props = cols.get("properties")
        queue_ids = cols.get("queueid")
        sharding = cols.get("shardingkey")
        for i in range(batch.num_rows):
            topic = opts.topic or (topics[i] if topics else None)
            if not topic:
                raise OptionError(f"row {self.rows} has no topic (null topic column and no topic option)")
            n = self._queue_count(topic)
            if queue_ids is not None and queue_ids[i] is not None:
                queue = int(queue_ids[i])
            elif sharding is not None and sharding[i] is not None:
                queue = zlib.crc32(sharding[i].encode()) % n
            else:
                queue = self.rows % n
            tag = tags[i] if tags is not None and tags[i] is not None else opts.tag
            key = keys[i] if keys is not None else None
            key_list = [key] if isinstance(key, str) else list(key or ())
            prop = dict(props[i]) if props is not None and props[i] else {}
            payload = encode_payload(_as_bytes(bodies[i]), tag, key_list, prop)
            self.queues.setdefault((topic, queue), []).append(payload)
            self.rows += 1

    def _add_simple(self, batch: pa.RecordBatch) -> None:
        """Rows with a body (and maybe a tag) and the topic option: build every payload with one
        Arrow kernel call (header, body and tag joined per row), then deal them round-robin."""
        topic = self.options.topic
        assert topic is not None
        n_rows = batch.num_rows
        if not n_rows:
            return
        body = batch.column(self.roles.get("body", self.roles.get("value", ""))).cast(pa.binary()).fill_null(b"")
        lengths = np.asarray(pc.binary_length(body).to_numpy(zero_copy_only=False), dtype=np.int64)
        if "tag" in self.roles:
            tags = batch.column(self.roles["tag"])
            if self.options.tag is not None:
                tags = tags.fill_null(self.options.tag)
        else:
            tags = pa.nulls(n_rows, pa.string()) if self.options.tag is None else pa.repeat(self.options.tag, n_rows)
        tag_bytes = tags.cast(pa.binary())
        tag_len = np.where(
            tags.is_null().to_numpy(zero_copy_only=False),
            record.NO_TAG,
            pc.binary_length(tag_bytes).fill_null(0).to_numpy(zero_copy_only=False),
        )
        heads = np.zeros(n_rows, dtype=record.PAYLOAD_HEAD_DTYPE)
        heads["body_len"], heads["tag_len"] = lengths, tag_len
        head_array = pa.Array.from_buffers(pa.binary(record.PAYLOAD_HEAD_SIZE), n_rows, [None, pa.py_buffer(heads)])
        joined = pc.binary_join_element_wise(head_array.cast(pa.binary()), body, tag_bytes.fill_null(b""), b"")
        payloads = joined.to_pylist()
        count = self._queue_count(topic)
        first = self.rows
        for q in range(count):
            share = payloads[(q - first) % count :: count]
            if share:
                self.queues.setdefault((topic, q), []).extend(share)
        self.rows += n_rows

    def send(self, identity: str | None) -> tuple[int, int]:
        """Send every queue's messages, queues in parallel, each queue's in order; wait for all."""

        def one(topic: str, queue: int, payloads: list[bytes]) -> tuple[int, int]:
            stored = dupes = 0
            for start in range(0, len(payloads), 1000):
                chunk = payloads[start : start + 1000]
                producer_id = f"{identity}/{topic}/{queue}" if identity else None
                result = self.producer.send_to_queue(topic, queue, chunk, producer_id=producer_id, sequence=start)
                stored += result.count
                dupes += result.duplicates
            return stored, dupes

        if not self.queues:
            return 0, 0
        workers = min(8, len(self.queues))
        with concurrent.futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sink") as pool:
            futures = [pool.submit(one, t, q, p) for (t, q), p in self.queues.items()]
            results = [f.result() for f in futures]  # raises the first failure: the task fails
        return sum(r[0] for r in results), sum(r[1] for r in results)


def _task_identity(streaming: bool) -> tuple[str | None, int]:
    from pyspark import TaskContext

    context = TaskContext.get()
    partition = context.partitionId() if context else 0
    if not streaming or context is None:
        return None, partition
    query_id = context.getLocalProperty("sql.streaming.queryId")
    batch_id = context.getLocalProperty("streaming.sql.batchId")
    if not query_id or batch_id is None:
        return None, partition
    return f"spark:{query_id}:{batch_id}:{partition}", partition


class _WriterBase:
    def __init__(self, options: WriterOptions, schema: StructType, streaming: bool) -> None:
        self.options = options
        self.roles = check_schema(schema, options)
        self.streaming = streaming

    def _write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        identity, partition = _task_identity(self.streaming)
        if not self.options.idempotent:
            identity = None
        batcher = _Batcher(producer_for(self.options), self.options, self.roles)
        for batch in iterator:  # consume everything: a half-read iterator breaks worker reuse
            batcher.add(batch)
        stored, dupes = batcher.send(identity)
        if dupes:
            log.info(
                "partition %s: %d messages were stored by an earlier run of this batch; not resent", partition, dupes
            )
        return SinkCommitMessage(partition, stored, dupes)


class RocketMQStreamWriter(_WriterBase, DataSourceStreamArrowWriter):
    def __init__(self, options: WriterOptions, schema: StructType) -> None:
        super().__init__(options, schema, streaming=True)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        return self._write(iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        total = sum(m.messages for m in messages if isinstance(m, SinkCommitMessage))
        log.info("micro-batch %d: %d messages written", batchId, total)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        log.warning("micro-batch %d aborted; messages already sent stay, and a re-run will not resend them", batchId)


class RocketMQBatchWriter(_WriterBase, DataSourceArrowWriter):
    def __init__(self, options: WriterOptions, schema: StructType) -> None:
        super().__init__(options, schema, streaming=False)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        return self._write(iterator)
