"""Message trace, recorded by the broker: what happened to each message of a traced topic,
stored as messages of the system topic ``RMQ_SYS_TRACE_TOPIC`` (:mod:`rocketspark.protocol.trace`).

Design
======

*What is traced.* A topic created with ``trace=True`` (``TopicConfig.trace``, kept in
``topics.json``, registered and copied to replicas with the rest of its config), or every
topic when the broker setting ``trace_enable`` is on. The held system topics
(``RMQ_SYS_*``, ``rmq_sys_*``: delay and half messages, the trace topic itself) never are.

*Where it is recorded.* On the broker, in the handlers every client's request ends in: our
SEND_MESSAGE / SEND_BATCH_MESSAGE (our producers, the Spark sink, and, translated, 4.x
producers and the v2 endpoint's sends) and PULL_MESSAGE (our consumers, the Spark source,
4.x pulls, the v2 endpoint's receives). So no client has to change, unlike RocketMQ's
client-side trace (its ``AsyncTraceDispatcher``). What the broker knows of the client goes
with it: the connection's address, the group a request names (``producerGroup``,
``consumerGroup``; the 4.x dialect fills them in from its clients' headers) and how it read
(``via``: pull, pop, spark...).

*Events follow RocketMQ's trace data where they fit.* RocketMQ's client writes one
``TraceContext`` per message (``Pub`` when sent, ``SubBefore``/``SubAfter`` around consuming),
encoded by ``TraceDataEncoder`` and keyed by the message's id and keys. The broker sees
records, not messages: one send of k messages is one batch record, stored and pulled whole.
So an event here is one ``TraceContext``-like JSON object per *record* (its field names
RocketMQ's), saying which of its messages it covers (``index``, ``count``), and the trace
message's key is the record's place in the log (``broker@offset``, ``record_key``): a batch of
1,000 costs one trace message and one key-index row, not 1,000.

*Finding one message's events among millions.* ``Admin.message_trace(id)`` finds the message
by either id as ``admin query-msg`` does (offset id: its broker and position; client id: the
key index), which gives its broker, record offset and place in the record; then one key
lookup in that broker's key index (``QUERY_MESSAGE`` on the trace topic, key
``broker@offset``) returns the record's events, of which those covering the message's place
are kept, in time order.

*Off the hot path.* A send or a pull of a traced topic appends one tuple to ``pending`` (a
pull keeps its answer's bytes, already built); nothing is encoded or written then.
``flush``, a background task on the broker's loop every ``FLUSH_MS``, turns them into
trace messages and stores them as one batch record per ``FLUSH_BATCH`` events through the
broker's own send handler (``serve_local``: so the key index, replication and retention
apply as to any topic). The trace topic is created on demand (one queue), as the retry
topics are. At most ``MAX_PENDING`` tuples and ``trace_max_pending_bytes`` bytes (a pull's
answer counts its size: a burst of large pulls must not hold much memory) wait; more are
dropped, counted (``dropped``, the broker counters' ``traceEventsDropped``) and logged at most
every ``DROP_LOG_S``, never held against a send. A slave records nothing (it takes no writes):
pulls served by a slave are not traced. The delay and transaction holders record from their
worker threads (``noted``): their appends and the flush's swap of the list take a lock, so that
none lands in a list already stored; the loop's own appends need none.

*Acknowledged by commit.* Pull consumers (ours, 4.x, Spark) acknowledge by committing a
queue's offset, not a message: a commit of a traced queue that moves it forward is one event
(``traceType`` ``Commit``), keyed by the queue, group and minute (``commit_key``), so that
``Admin.message_trace`` finds, for each group a message was delivered to, the first commit
past its offset by looking at the minutes from its delivery on.
"""

from __future__ import annotations

import logging
import struct
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Final, Protocol

from rocketspark.codec.build import encode_messages
from rocketspark.codec.layout import BORN_AT, BROKER_AT, BROKER_FIELDS, COUNT_AT, PREFIX
from rocketspark.protocol.codes import RequestCode, ResponseCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.trace import COMMIT, PUB, SUB_BEFORE, TRACE_TOPIC, commit_key, encode_event, record_key
from rocketspark.protocol.types import Message, MessageExt, Perm, TopicConfig
from rocketspark.protocol.validation import HELD_TOPIC_PREFIXES

log = logging.getLogger(__name__)

FLUSH_MS: Final = 200  # how often pending events are stored
FLUSH_BATCH: Final = 1000  # trace messages per stored record
MAX_PENDING: Final = 100_000  # tuples waiting; past it new ones are dropped (counted)
ITEM_BYTES: Final = 200  # what a pending tuple holds besides a noted message's body or a pull's spans
DROP_LOG_S: Final = 10.0  # dropped events are logged at most this often
NOTE: Final = "note"  # a pending tuple of ``noted``
_COUNT = struct.Struct(">I")  # a record's message count, at layout.COUNT_AT
_BORN = struct.Struct(">Q")  # born_ms, at layout.BORN_AT


@dataclass(frozen=True, slots=True)
class TraceSettings:
    """The broker's ``trace_*`` settings (``broker.config``, where their defaults are)."""

    everything: bool  # trace_enable
    max_pending_bytes: int  # trace_max_pending_bytes


class TraceTopics(Protocol):
    """What the recorder reads and creates of the topic table."""

    def get(self, name: str) -> TopicConfig | None: ...

    def put(self, config: TopicConfig, since_offset: int) -> bool: ...


class Office(Protocol):
    """Whether this broker takes writes (a slave records nothing)."""

    @property
    def is_master(self) -> bool: ...


class Log(Protocol):
    """Where the log ends (a new topic's records start there)."""

    @property
    def log_max_offset(self) -> int: ...


Serve = Callable[[RemotingCommand], Coroutine[Any, Any, RemotingCommand]]


def born_ms(record: bytes) -> int:
    """The producer's clock when it built the (sent) batch record."""
    return int(_BORN.unpack_from(record, BORN_AT)[0]) if len(record) >= BORN_AT + 8 else 0


def _delivered_spans(body: bytes, from_offset: int) -> list[tuple[int, int, int, int]]:
    """Per record of a pull's answer: its first delivered message's queue offset, the record's
    log offset, how many of its messages come before ``from_offset``, and how many after."""
    spans = []
    pos, end = 0, len(body)
    while pos + BROKER_AT + BROKER_FIELDS.size <= end:
        size = PREFIX.unpack_from(body, pos)[0]
        _queue, base, record_offset, _store_ms, _ = BROKER_FIELDS.unpack_from(body, pos + BROKER_AT)
        count = _COUNT.unpack_from(body, pos + COUNT_AT)[0]
        skip = max(0, from_offset - base)
        if skip < count:
            spans.append((base + skip, record_offset, skip, count - skip))
        if size <= 0:
            break
        pos += size
    return spans


def client_of(cmd: RemotingCommand) -> str:
    """Who made a request, as far as the broker knows: the address a translating endpoint
    names (``clientHost``), else the connection's peer."""
    given = cmd.ext.get("clientHost")
    if given:
        return str(given)
    channel = cmd.channel
    if channel is not None:
        return str(channel.peer)
    return "this broker" if cmd.local else ""


class TraceRecorder:
    """Pending trace events of one broker, and their flush into the trace topic."""

    def __init__(
        self,
        broker: str,
        topics: TraceTopics,
        serve: Serve,
        office: Office,
        log: Log,
        settings: TraceSettings,
    ) -> None:
        self.broker = broker
        self.topics = topics
        self.serve = serve  # the broker's own send handler (Dispatcher.serve_local)
        self.office = office
        self.log = log
        self.everything = settings.everything
        self.max_pending_bytes = settings.max_pending_bytes
        self.pending: list[tuple[Any, ...]] = []
        self.pending_bytes = 0
        self.recorded = 0  # trace messages stored
        self.dropped = 0  # events lost: over MAX_PENDING or max_pending_bytes, on a slave, or a failed write
        self._logged_drops, self._logged_at = 0, 0.0
        self._swap = threading.Lock()  # worker threads' appends vs the flush's swap

    def traced(self, config: TopicConfig | None) -> bool:
        """Whether sends and pulls of this topic are recorded."""
        if config is None or not self.office.is_master:  # a slave records nothing
            return False
        return config.trace or (self.everything and not config.name.startswith(HELD_TOPIC_PREFIXES))

    def _add(self, item: tuple[Any, ...], size: int = 0) -> None:
        """Buffer one event, under the lock the flush swaps the buffer under: events come from
        the event loop and from worker threads (``noted``) alike."""
        size += ITEM_BYTES
        with self._swap:
            if len(self.pending) >= MAX_PENDING or self.pending_bytes + size > self.max_pending_bytes:
                self._drop(1, "the buffer is full (trace_max_pending_bytes)")
                return
            self.pending.append(item)
            self.pending_bytes += size

    def _drop(self, count: int, why: str) -> None:
        """Count lost events; say so in the log now and then, not once per event."""
        self.dropped += count
        now = time.monotonic()
        if now - self._logged_at >= DROP_LOG_S:
            log.warning(
                "broker %s: %d trace events dropped (%d in all): %s",
                self.broker,
                self.dropped - self._logged_drops,
                self.dropped,
                why,
            )
            self._logged_drops, self._logged_at = self.dropped, now

    def sent(
        self,
        topic: str,
        queue_id: int,
        queue_offset: int,
        record_offset: int,
        count: int,
        first_id: str,
        born: int,
        cost_ms: float,
        group: str,
        client: str,
    ) -> None:
        """A record stored by a send (the broker's clock now: its store time)."""
        self._add(
            (
                PUB,
                int(time.time() * 1000),
                topic,
                queue_id,
                queue_offset,
                record_offset,
                count,
                first_id,
                born,
                cost_ms,
                group,
                client,
            )
        )

    def delivered(
        self, topic: str, queue_id: int, from_offset: int, body: bytes, group: str, client: str, via: str
    ) -> None:
        """A pull's answer (whole records, ``body``) read from ``from_offset`` on: where each
        record's delivered messages are is taken now, so the answer is not held till the flush."""
        at_ms = int(time.time() * 1000)
        spans = _delivered_spans(body, from_offset)
        self._add((SUB_BEFORE, at_ms, topic, queue_id, spans, group, client, via), 24 * len(spans))

    def committed(self, topic: str, queue_id: int, group: str, offset: int, client: str) -> None:
        """A group committed its progress on a traced queue: the messages before ``offset``
        are acknowledged (a pull consumer's, the Spark source's, a 4.x consumer's ack)."""
        self._add((COMMIT, int(time.time() * 1000), topic, queue_id, group, offset, client))

    def traced_topic(self, topic: str) -> bool:
        return self.traced(self.topics.get(topic))

    def noted(self, kind: str, message: MessageExt, group: str, client: str, detail: str) -> None:
        """Something that befell one stored message (sent back for a retry, to the DLQ,
        acknowledged, scheduled, prepared...), recorded against its record wherever it is
        stored."""
        self._add((NOTE, int(time.time() * 1000), kind, message, group, client, detail), len(message.body))

    # -- the background flush --------------------------------------------------------------

    async def flush(self) -> None:
        """Store what is pending (the broker's loop, every ``FLUSH_MS``)."""
        if not self.pending:
            return
        with self._swap:
            pending, self.pending, self.pending_bytes = self.pending, [], 0
        if not self.office.is_master:
            self._drop(len(pending), "a slave records nothing")
            return
        events: list[tuple[str, dict[str, Any]]] = []
        for item in pending:
            events += self._events(item)
        if not events:
            return
        self._ensure_topic()
        for start in range(0, len(events), FLUSH_BATCH):
            await self._write(events[start : start + FLUSH_BATCH])

    def _events(self, item: tuple[Any, ...]) -> list[tuple[str, dict[str, Any]]]:
        if item[0] == PUB:
            return self._sent_events(item)
        if item[0] == SUB_BEFORE:
            return self._delivered_events(item)
        if item[0] == COMMIT:
            return self._commit_events(item)
        _, at_ms, kind, message, group, client, detail = item
        fields = self._common(kind, at_ms, message.topic, message.queue_id, group, client)
        fields.update(
            broker=message.broker_name,
            queueOffset=message.queue_offset,
            recordOffset=message.commitlog_offset,
            index=message.batch_index,
            count=1,
            detail=detail,
        )
        return [(record_key(message.broker_name, message.commitlog_offset), fields)]

    def _common(self, kind: str, at_ms: int, topic: str, queue_id: int, group: str, client: str) -> dict[str, Any]:
        return {
            "traceType": kind,
            "timeStamp": at_ms,
            "broker": self.broker,
            "topic": topic,
            "queueId": queue_id,
            "groupName": group,
            "clientHost": client,
        }

    def _sent_events(self, item: tuple[Any, ...]) -> list[tuple[str, dict[str, Any]]]:
        _, at_ms, topic, queue_id, queue_offset, record_offset, count, first_id, born, cost_ms, group, client = item
        fields = self._common(PUB, at_ms, topic, queue_id, group, client)
        fields.update(
            queueOffset=queue_offset,
            recordOffset=record_offset,
            index=0,
            count=count,
            msgId=first_id,
            bornTime=born or at_ms,
            storeTime=at_ms,
            costTime=round(cost_ms, 3),
            isSuccess=True,
        )
        return [(record_key(self.broker, record_offset), fields)]

    def _delivered_events(self, item: tuple[Any, ...]) -> list[tuple[str, dict[str, Any]]]:
        """One event per record of the answer, covering its messages from the pull's offset on."""
        _, at_ms, topic, queue_id, spans, group, client, via = item
        events = []
        for first, record_offset, skip, count in spans:
            fields = self._common(SUB_BEFORE, at_ms, topic, queue_id, group, client)
            fields.update(queueOffset=first, recordOffset=record_offset, index=skip, count=count, via=via)
            events.append((record_key(self.broker, record_offset), fields))
        return events

    def _commit_events(self, item: tuple[Any, ...]) -> list[tuple[str, dict[str, Any]]]:
        _, at_ms, topic, queue_id, group, offset, client = item
        fields = self._common(COMMIT, at_ms, topic, queue_id, group, client)
        fields.update(commitOffset=offset)
        return [(commit_key(self.broker, topic, queue_id, group, at_ms), fields)]

    def _ensure_topic(self) -> None:
        """The trace topic, created here on first use. The nameservers learn of it with the
        broker's next registration: nobody needs its route (``admin trace`` asks the
        message's broker itself), and replicas copy it with the other topics."""
        if self.topics.get(TRACE_TOPIC) is None:
            self.topics.put(TopicConfig(TRACE_TOPIC, 1, 1, Perm.READ_WRITE), self.log.log_max_offset)

    async def _write(self, events: list[tuple[str, dict[str, Any]]]) -> None:
        messages = [Message(TRACE_TOPIC, encode_event(fields), keys=[key]) for key, fields in events]
        record = encode_messages(TRACE_TOPIC, messages)
        request = RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, {"topic": TRACE_TOPIC, "queueId": 0}, record)
        answer = await self.serve(request)
        if answer.code != ResponseCode.SUCCESS:
            self._drop(len(events), f"not stored: {answer.remark}")
            return
        self.recorded += len(events)
