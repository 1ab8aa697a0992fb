"""The sink: streaming and batch writers of ``format("rocketmq")``.

Columns (names case-insensitive): ``body`` or ``value`` (binary or string; required),
``topic`` (string; or the ``topic`` option, which wins, as in Kafka's sink), ``tag``,
``keys`` (string or array of strings), ``properties`` (map of strings), ``queueId`` (int:
the logical queue) and ``shardingKey`` (string: same key, same queue; stored as the
``__SHARDINGKEY`` property, the message group the official RocketMQ 5 consumers see). Anything
else is an error, so a typo does not silently drop data.

Guarantee. Each task waits until the broker acknowledged every message before it reports
success. In a streaming query the writes are idempotent per micro-batch: a task numbers its
messages per queue under a stable identity (query id, batch id, partition), and the broker
drops messages it already stored under that identity. So when Spark re-runs a micro-batch
(after a failure, or after a restart from a checkpoint whose commit was not recorded), the
topic gets each message of the batch once, provided the re-run produces the same rows in the
same order per partition (a deterministic query over a replayable source, like this one).
Messages without a ``queueId`` or ``shardingKey`` go to queue ``(partition + row number) %
queues`` for the same reason. The identity and the numbering travel in each batch record's
header, so a broker rebuilds what it deduplicates by from its log after a crash, and hands it
to the new leader when a logical queue is remapped (:mod:`broker.dedupe`). A broker remembers
identities for ``dedupe_retention_hours`` (24 h). Batch writes (``df.write``) are
at-least-once.

Rows are encoded column by column: each queue's rows become batch records straight from their
Arrow buffers (:mod:`rocketspark.codec.from_arrow`).
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import logging
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, LongType, MapType, StringType, StructType

from rocketspark.client.producer import Producer
from rocketspark.client.selection import queues_for_keys
from rocketspark.codec.build import pack_ext
from rocketspark.codec.from_arrow import MessageArrays, records
from rocketspark.codec.layout import MAX_TAG_BYTES
from rocketspark.errors import OptionError
from rocketspark.protocol.properties import SHARDING_KEY
from rocketspark.protocol.types import SendResult
from rocketspark.spark.access import check_sink
from rocketspark.spark.executor_imports import Guarded
from rocketspark.spark.options import WriterOptions

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
    """One producer per worker process and configuration, reused across tasks; one that was
    closed is replaced, never handed out."""
    key = (os.getpid(), options)
    with _lock:
        producer = _producers.get(key)
        if producer is None or producer.closed:
            producer = _producers[key] = Producer(
                list(options.nameservers),
                send_timeout_ms=options.send_timeout_ms,
                retry_times_when_send_failed=options.retry_times,
                batch_max_bytes=options.batch_max_bytes,
                **options.connection.client_kwargs(),
            )
        return producer


class QueueSender(Protocol):
    """What a batcher needs of its producer (a ``Producer``; a test's recorder): how many
    queues a topic has, and a send of one batch record to one queue."""

    def queue_count(self, topic: str) -> int: ...

    def send_to_queue(self, topic: str, queue_id: int, record: bytes) -> SendResult: ...


class Batcher:
    """Collects a task's rows per (topic, queue) in row order, as Arrow arrays.

    Every column is handled for all rows at once with Arrow kernels and numpy: the queue of
    each row comes from its ``queueId``, else the CRC32 of its ``shardingKey`` (computed once
    per distinct key), else round robin. Only rows with keys or properties cost Python work
    (their msgpack part).
    """

    def __init__(self, producer: QueueSender, options: WriterOptions, roles: dict[str, str], partition: int) -> None:
        self.producer = producer
        self.options = options
        self.roles = roles
        # Round robin starts at the task's partition, so that the first rows of all tasks do not
        # all land on queue 0; it stays a function of the row, so a re-run deals rows alike.
        self.partition = partition
        self.queues: dict[tuple[str, int], list[MessageArrays]] = {}
        self.rows = 0
        self._counts: dict[str, int] = {}

    def _queue_count(self, topic: str) -> int:
        count = self._counts.get(topic)
        if count is None:
            count = self._counts[topic] = self.producer.queue_count(topic)
        return count

    def _column(self, batch: pa.RecordBatch, role: str) -> pa.Array | None:
        name = self.roles.get(role)
        return None if name is None else batch.column(name)

    def _keep(self, key: tuple[str, int], arrays: MessageArrays, rows: np.ndarray) -> None:
        picked = pa.array(rows, pa.int64())
        part = MessageArrays(arrays.body.take(picked), arrays.tag.take(picked), arrays.ext.take(picked))
        self.queues.setdefault(key, []).append(part)

    def add(self, batch: pa.RecordBatch) -> None:
        n = batch.num_rows
        if not n:
            return
        arrays = self._arrays(batch)
        topic = self.options.topic
        if topic is not None and not {"queueid", "shardingkey"} & set(self.roles):
            # round robin only: row i goes to queue (first + i) % count, so each queue's rows are a slice
            count, first = self._queue_count(topic), self.partition + self.rows
            for queue_id in range(count):
                rows = np.arange((queue_id - first) % count, n, count)
                if len(rows):
                    self._keep((topic, queue_id), arrays, rows)
            self.rows += n
            return
        names, topic_ix, queue = self._targets(batch)
        order = np.argsort(queue, kind="stable")  # rows grouped by (topic, queue), in row order within each
        order = order[np.argsort(topic_ix[order], kind="stable")]
        t, q = topic_ix[order], queue[order]
        cuts = np.flatnonzero((t[1:] != t[:-1]) | (q[1:] != q[:-1])) + 1
        for begin, stop in zip([0, *cuts.tolist()], [*cuts.tolist(), n], strict=True):
            self._keep((names[int(t[begin])], int(q[begin])), arrays, order[begin:stop])
        self.rows += n

    def _arrays(self, batch: pa.RecordBatch) -> MessageArrays:
        """Every row's body, tag and keys/properties, as the batch record stores them."""
        n = batch.num_rows
        body = batch.column(self.roles["body"] if "body" in self.roles else self.roles["value"])
        body = body.cast(pa.binary()).fill_null(b"")
        tags = self._column(batch, "tag")
        default = self.options.tag
        if tags is None:
            tags = pa.nulls(n, pa.string()) if default is None else pa.repeat(pa.scalar(default, pa.string()), n)
        elif default is not None:
            tags = tags.fill_null(default)
        tag_len = np.asarray(pc.binary_length(tags.cast(pa.binary())).fill_null(0).to_numpy(zero_copy_only=False))
        too_long = np.flatnonzero(tag_len > MAX_TAG_BYTES)
        if len(too_long):
            i = int(too_long[0])
            raise OptionError(
                f"row {self.rows + i} has a tag of {int(tag_len[i])} bytes; a tag is limited to "
                f"{MAX_TAG_BYTES} bytes of UTF-8"
            )
        ext = self._extensions(batch)
        return MessageArrays(
            body, tags.cast(pa.string()), pa.repeat(pa.scalar(b"", pa.binary()), n) if ext is None else ext
        )

    def _extensions(self, batch: pa.RecordBatch) -> pa.Array | None:
        """The packed keys and properties of every row (empty where a row has none), or None
        when no row has any."""
        keys, props = self._column(batch, "keys"), self._column(batch, "properties")
        sharding = self._column(batch, "shardingkey")
        n = batch.num_rows
        has = np.zeros(n, dtype=bool) if sharding is None else sharding.is_valid().to_numpy(zero_copy_only=False)
        if keys is not None:
            if pa.types.is_string(keys.type) or pa.types.is_large_string(keys.type):
                has |= keys.is_valid().to_numpy(zero_copy_only=False)
            else:
                has |= pc.list_value_length(keys).fill_null(0).to_numpy(zero_copy_only=False) > 0
        if props is not None:
            sizes = np.diff(props.offsets.to_numpy(zero_copy_only=False))
            has |= (sizes > 0) & props.is_valid().to_numpy(zero_copy_only=False)
        rows = np.flatnonzero(has)
        if not len(rows):
            return None
        picked = pa.array(rows)
        key_rows = keys.take(picked).to_pylist() if keys is not None else [None] * len(rows)
        prop_rows = props.take(picked).to_pylist() if props is not None else [None] * len(rows)
        group_rows = sharding.take(picked).to_pylist() if sharding is not None else [None] * len(rows)
        exts = [
            pack_ext([key] if isinstance(key, str) else list(key or ()), _with_group(prop, group))
            for key, prop, group in zip(key_rows, prop_rows, group_rows, strict=True)
        ]
        empty = pa.repeat(pa.scalar(b"", pa.binary()), n)
        return pc.replace_with_mask(empty, pa.array(has), pa.array(exts, pa.binary()))

    def _targets(self, batch: pa.RecordBatch) -> tuple[list[str], np.ndarray, np.ndarray]:
        """The topic names, and each row's topic (an index into them) and queue."""
        n = batch.num_rows
        if self.options.topic is not None:
            names, topic_ix = [self.options.topic], np.zeros(n, dtype=np.int64)
        else:
            column = batch.column(self.roles["topic"])
            missing = pc.or_kleene(column.is_null(), pc.equal(column, "")).fill_null(True)
            if pc.any(missing).as_py():
                row = self.rows + int(np.argmax(missing.to_numpy(zero_copy_only=False)))
                raise OptionError(f"row {row} has no topic (null topic column and no topic option)")
            encoded = column.dictionary_encode()
            names = encoded.dictionary.to_pylist()
            topic_ix = np.asarray(encoded.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
        counts = np.array([self._queue_count(name) for name in names], dtype=np.int64)[topic_ix]
        queue = (self.partition + self.rows + np.arange(n, dtype=np.int64)) % counts
        sharding = self._column(batch, "shardingkey")
        if sharding is not None and sharding.null_count < n:
            encoded = sharding.dictionary_encode()  # one hash per distinct key
            keyed = encoded.indices.is_valid().to_numpy(zero_copy_only=False)
            index = encoded.indices.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
            queue = np.where(keyed, queues_for_keys(encoded.dictionary.to_pylist(), index, counts), queue)
        queue_ids = self._column(batch, "queueid")
        if queue_ids is not None and queue_ids.null_count < n:
            given = queue_ids.is_valid().to_numpy(zero_copy_only=False)
            queue = np.where(given, queue_ids.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64), queue)
        return names, topic_ix, queue

    def send(self, identity: str | None) -> tuple[int, int]:
        """Send every queue's messages, queues in parallel, each queue's in order in batch
        records of at most ``batchMaxBytes``; wait for all. With an identity, a message's
        sequence number is its position in its queue's list, so a re-run numbers its messages
        alike and the broker drops what it stored before."""
        producer = None if identity is None else (producer_id(identity), 0)

        def one(topic: str, queue: int, parts: list[MessageArrays]) -> tuple[int, int]:
            arrays = (
                parts[0]
                if len(parts) == 1
                else MessageArrays(
                    pa.concat_arrays([p.body for p in parts]),
                    pa.concat_arrays([p.tag for p in parts]),
                    pa.concat_arrays([p.ext for p in parts]),
                )
            )
            stored = dupes = 0
            for record, _count in records(topic, arrays, self.options.batch_max_bytes, producer=producer):
                result = self.producer.send_to_queue(topic, queue, record)
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


def producer_id(identity: str) -> int:
    """A task's identity as the 64-bit producer id of its batch records (never 0: 0 means
    not idempotent). A collision between two identities is a 1 in 2^63 event."""
    return int.from_bytes(hashlib.blake2b(identity.encode(), digest_size=8).digest(), "big") | 1


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
        batcher = Batcher(producer_for(self.options), self.options, self.roles, partition)
        for batch in iterator:  # consume everything: a half-read iterator breaks worker reuse
            batcher.add(batch)
        stored, dupes = batcher.send(identity)
        if dupes:
            log.info(
                "partition %s: %d messages were stored by an earlier run of this batch; not resent", partition, dupes
            )
        return SinkCommitMessage(partition, stored, dupes)


class RocketMQStreamWriter(Guarded, _WriterBase, DataSourceStreamArrowWriter):
    def __init__(self, options: WriterOptions, schema: StructType) -> None:
        super().__init__(options, schema, streaming=True)
        check_sink(options)  # on the driver, when the query starts

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        return self._write(iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        total = sum(m.messages for m in messages if isinstance(m, SinkCommitMessage))
        log.info("micro-batch %d: %d messages written", batchId, total)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        log.warning("micro-batch %d aborted; messages already sent stay, and a re-run will not resend them", batchId)


class RocketMQBatchWriter(Guarded, _WriterBase, DataSourceArrowWriter):
    def __init__(self, options: WriterOptions, schema: StructType) -> None:
        super().__init__(options, schema, streaming=False)
        check_sink(options)  # on the driver, before any task runs

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        return self._write(iterator)


def _with_group(properties: Any, group: str | None) -> dict[str, str]:
    """A row's properties, with its shardingKey as RocketMQ's message group property (what the
    official consumers read as ``message_group``)."""
    out = dict(properties or ())
    if group is not None:
        out[SHARDING_KEY] = group
    return out
