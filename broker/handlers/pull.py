"""PULL_MESSAGE: read a range of one queue, holding the request while there is nothing new.

Header fields: ``topic``, ``queueId``, ``queueOffset``, ``maxMsgNums`` (default 32),
``maxBytes``, ``suspendTimeoutMs`` (long poll; 0 answers at once), ``tags`` (list; the
server-side tag filter) or ``sql`` (an SQL92 filter expression), ``endOffset`` (never read at
or past it), and for a segment of a static topic ``logicQueueId`` + ``gen`` + ``epoch``.
Progress is committed separately (UPDATE_CONSUMER_OFFSET).

A tag filter skips batches by their tag summary, without reading them. An SQL92 filter reads
them: each distinct expression is compiled once (``compile_cached``), the records read are
decoded and evaluated at once, and only the records holding a message the expression passes
are answered, whole (the reader filters them message by message, as it does tags). A read
whose every record was filtered out goes on reading, up to ``MAX_FILTER_SCAN`` messages, so
a selective filter does not cost a round trip per batch.

Outcomes that are not faults are response codes, not errors: PULL_NOT_FOUND (nothing new),
PULL_RETRY_IMMEDIATELY (everything scanned was filtered out), PULL_OFFSET_MOVED (the offset
is outside [min, max]; ``next`` says where to go). The body is the stored records.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from functools import partial

from broker.config import BrokerConfig
from broker.longpoll import LongPollHub
from broker.static_topics import StaticTopics
from broker.store.reading import GetResult, GetStatus
from broker.store.store import MessageStore
from broker.topics import TopicTable
from broker.trace import TraceRecorder, client_of
from rocketspark.codec.layout import RecordCorrupted, tag_hash
from rocketspark.errors import InvalidParameterError
from rocketspark.filtering import compile_cached
from rocketspark.filtering.messages import matching_records
from rocketspark.protocol.codes import RequestCode, ResponseCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.headers import get_int, get_list, get_str
from rocketspark.protocol.static_mapping import LogicQueueMappingItem
from rocketspark.protocol.trace import NO_DELIVERY
from rocketspark.remoting.server import Dispatcher

MAX_MESSAGES_PER_PULL = 65_536
MAX_FILTER_SCAN = 4096  # messages an SQL92-filtered pull reads past before it answers (the loop's time)

_CODES = {
    GetStatus.FOUND: ResponseCode.SUCCESS,
    GetStatus.NO_MATCHED_MESSAGE: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetStatus.NO_MESSAGE_IN_QUEUE: ResponseCode.PULL_NOT_FOUND,
    GetStatus.NO_MATCHED_LOGIC_QUEUE: ResponseCode.PULL_NOT_FOUND,
    GetStatus.OFFSET_OVERFLOW_ONE: ResponseCode.PULL_NOT_FOUND,
    GetStatus.OFFSET_TOO_SMALL: ResponseCode.PULL_OFFSET_MOVED,
    GetStatus.OFFSET_OVERFLOW_BADLY: ResponseCode.PULL_OFFSET_MOVED,
}


@dataclass(frozen=True, slots=True)
class PullContext:
    """What a pull touches."""

    config: BrokerConfig
    topics: TopicTable
    static: StaticTopics
    store: MessageStore
    longpoll: LongPollHub
    trace: TraceRecorder


def register(dispatcher: Dispatcher, ctx: PullContext) -> None:
    dispatcher.register(RequestCode.PULL_MESSAGE, partial(handle_pull, ctx))
    dispatcher.register_stream(RequestCode.PULL_MESSAGE, partial(stream_pull, ctx))


class _PullRequest:
    """A parsed pull request; ``read`` reads from any offset with its limits."""

    def __init__(self, ctx: PullContext, cmd: RemotingCommand) -> None:
        self.ctx = ctx
        self.cmd = cmd
        self.topic = get_str(cmd, "topic")
        self.queue_id = get_int(cmd, "queueId")
        self.offset = get_int(cmd, "queueOffset")
        self.traced = ctx.trace.traced(ctx.topics.check_readable(self.topic, self.queue_id))
        self.max_messages = min(max(get_int(cmd, "maxMsgNums", 32), 1), MAX_MESSAGES_PER_PULL)
        limit = ctx.config.max_pull_bytes
        self.max_bytes = min(max(get_int(cmd, "maxBytes", limit), 1), limit)
        self.suspend_ms = min(max(get_int(cmd, "suspendTimeoutMs", 0), 0), ctx.config.max_long_poll_ms)
        tags = get_list(cmd, "tags", None)
        self.tag_hashes = frozenset(tag_hash(str(t).encode()) for t in tags) if tags else None
        sql = get_str(cmd, "sql", "")
        if sql and tags:
            raise InvalidParameterError("a pull filters by tags or by an SQL92 expression, not both")
        self.selector = compile_cached(sql) if sql else None
        end = get_int(cmd, "endOffset", -1)
        self.end_offset = end if end >= 0 else None
        # A read of one segment of a static topic's logical queue names it (logicQueueId, gen).
        self.logical_id = get_int(cmd, "logicQueueId", -1)
        self.gen = get_int(cmd, "gen", -1)
        self.epoch = get_int(cmd, "epoch", -1)
        self.segmented = self.logical_id >= 0 and ctx.static.is_static(self.topic)
        if self.segmented:
            self._item()

    def _item(self) -> LogicQueueMappingItem:
        return self.ctx.static.item_for_read(self.topic, self.logical_id, self.gen, self.queue_id, self.epoch)

    @property
    def key(self) -> tuple[str, int]:
        return (self.topic, self.queue_id)

    def read(self, offset: int) -> GetResult:
        """Read from ``offset`` what passes the request's filter."""
        result = self._read_store(offset)
        if self.selector is None:
            return result
        scanned = 0
        while result.status is GetStatus.FOUND:
            try:
                body, passed = matching_records(result.body, self.selector, offset, self.end_offset)
            except RecordCorrupted:
                return result  # unfiltered: the reader's CRC check names the damage
            if body:
                return replace(result, body=body, count=passed)
            scanned += result.next_offset - offset
            offset = result.next_offset
            if scanned >= MAX_FILTER_SCAN or not self._more_after(offset, result):
                break
            result = self._read_store(offset)
        if not scanned:
            return result
        # every record read was filtered out: the reader goes on from where this read got to
        return replace(result, status=GetStatus.NO_MATCHED_MESSAGE, body=b"", count=0, next_offset=offset)

    def _more_after(self, offset: int, result: GetResult) -> bool:
        """Whether a read may go on at ``offset``: before the queue's end, the request's end
        and a sealed segment's end."""
        if offset >= result.max_offset or (self.end_offset is not None and offset >= self.end_offset):
            return False
        return not (self.segmented and self._item().sealed and offset >= self._item().end_offset)

    def _read_store(self, offset: int) -> GetResult:
        """Read from ``offset``, never past the end of a sealed segment (checked on every read,
        so a seal that happens while a long poll waits is noticed)."""
        limit = self.max_messages
        if self.segmented:
            item = self._item()
            if item.sealed:
                if offset >= item.end_offset:
                    raise self.ctx.static.stale_read(self.topic, self.logical_id, item, self.epoch)
                limit = min(limit, item.end_offset - offset)
        return self.ctx.store.get(
            self.topic,
            self.queue_id,
            offset,
            max_messages=limit,
            max_bytes=self.max_bytes,
            tag_hashes=self.tag_hashes,
            end_offset=self.end_offset,
        )


def _response(cmd: RemotingCommand, result: GetResult, request: _PullRequest, offset: int) -> RemotingCommand:
    if result.body and request.traced and (via := str(cmd.ext.get("via", "pull"))) not in NO_DELIVERY:
        group = str(cmd.ext.get("consumerGroup", ""))
        request.ctx.trace.delivered(request.topic, request.queue_id, offset, result.body, group, client_of(cmd), via)
    return cmd.response(
        _CODES[result.status],
        ext={"next": result.next_offset, "min": result.min_offset, "max": result.max_offset},
        body=result.body,
    )


async def _read_held(request: _PullRequest, offset: int, deadline: float) -> GetResult:
    """Read from ``offset``; while there is nothing new, hold until a send to the queue wakes
    us, ``deadline`` (monotonic) passes, or the broker shuts down. The time held is added to
    the request's ``held``: the metrics keep it out of its latency."""
    hub = request.ctx.longpoll
    while True:
        result = request.read(offset)
        now = time.monotonic()
        remaining = deadline - now
        if _CODES[result.status] != ResponseCode.PULL_NOT_FOUND or remaining <= 0 or hub.closing:
            return result
        await hub.wait(request.key, remaining)
        request.cmd.held += time.monotonic() - now


async def handle_pull(ctx: PullContext, cmd: RemotingCommand) -> RemotingCommand:
    request = _PullRequest(ctx, cmd)
    result = await _read_held(request, request.offset, time.monotonic() + request.suspend_ms / 1000)
    return _response(cmd, result, request, request.offset)


async def stream_pull(ctx: PullContext, cmd: RemotingCommand) -> AsyncIterator[RemotingCommand]:
    """A pull that keeps going: send each batch as soon as it is stored, for ``suspendTimeoutMs``.

    It ends at that deadline with a PULL_NOT_FOUND carrying the next offset, or at once on
    PULL_OFFSET_MOVED. gRPC flow control holds the loop back when the consumer is slower.
    """
    request = _PullRequest(ctx, cmd)
    offset = request.offset
    deadline = time.monotonic() + max(request.suspend_ms, 1) / 1000
    while True:
        result = await _read_held(request, offset, deadline)
        yield _response(cmd, result, request, offset)
        if _CODES[result.status] not in (ResponseCode.SUCCESS, ResponseCode.PULL_RETRY_IMMEDIATELY):
            return
        offset = result.next_offset
