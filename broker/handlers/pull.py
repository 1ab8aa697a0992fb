"""PULL_MESSAGE: read a range of one queue, holding the request while there is nothing new.

Header fields: ``topic``, ``queueId``, ``queueOffset``, ``maxMsgNums`` (default 32),
``maxBytes``, ``suspendTimeoutMs`` (long poll; 0 answers at once), ``tags`` (list; the
server-side tag filter), ``endOffset`` (never read at or past it), and for a segment of a
static topic ``logicQueueId`` + ``gen`` + ``epoch``. Progress is committed separately
(UPDATE_CONSUMER_OFFSET).

Outcomes that are not faults are response codes, not errors: PULL_NOT_FOUND (nothing new),
PULL_RETRY_IMMEDIATELY (everything scanned was filtered out), PULL_OFFSET_MOVED (the offset
is outside [min, max]; ``next`` says where to go). The body is the stored records.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from functools import partial
from typing import TYPE_CHECKING

from broker.store.reading import GetResult, GetStatus
from broker.store.recovery import tag_hash
from rocketspark.errors import InvalidParameterError, NoPermissionError, TopicNotExistError
from rocketspark.protocol.codes import RequestCode, ResponseCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.headers import get_int, get_list, get_str
from rocketspark.protocol.mapping import LogicQueueMappingItem
from rocketspark.protocol.types import Perm, TopicConfig

if TYPE_CHECKING:
    from broker.server import Broker

MAX_MESSAGES_PER_PULL = 65_536

_CODES = {
    GetStatus.FOUND: ResponseCode.SUCCESS,
    GetStatus.NO_MATCHED_MESSAGE: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetStatus.NO_MESSAGE_IN_QUEUE: ResponseCode.PULL_NOT_FOUND,
    GetStatus.NO_MATCHED_LOGIC_QUEUE: ResponseCode.PULL_NOT_FOUND,
    GetStatus.OFFSET_OVERFLOW_ONE: ResponseCode.PULL_NOT_FOUND,
    GetStatus.OFFSET_TOO_SMALL: ResponseCode.PULL_OFFSET_MOVED,
    GetStatus.OFFSET_OVERFLOW_BADLY: ResponseCode.PULL_OFFSET_MOVED,
}


def register(broker: Broker) -> None:
    broker.dispatcher.register(RequestCode.PULL_MESSAGE, partial(handle_pull, broker))
    broker.dispatcher.register_stream(RequestCode.PULL_MESSAGE, partial(stream_pull, broker))


def check_readable(broker: Broker, topic: str, queue_id: int) -> TopicConfig:
    """The topic's config, if the topic exists here, is readable and has the queue."""
    config = broker.topics.get(topic)
    if config is None:
        raise TopicNotExistError(f'topic "{topic}" does not exist on broker {broker.name}')
    if not config.perm & Perm.READ or not broker.perm & Perm.READ:
        raise NoPermissionError(f'topic "{topic}" is not readable on broker {broker.name}')
    if not 0 <= queue_id < max(config.read_queue_nums, config.write_queue_nums):
        raise InvalidParameterError(
            f'queue {queue_id} does not exist: topic "{topic}" has {config.read_queue_nums} read queues on '
            f"broker {broker.name}"
        )
    return config


class _PullRequest:
    """A parsed pull request; ``read`` reads from any offset with its limits."""

    def __init__(self, broker: Broker, cmd: RemotingCommand) -> None:
        self.broker = broker
        self.topic = get_str(cmd, "topic")
        self.queue_id = get_int(cmd, "queueId")
        self.offset = get_int(cmd, "queueOffset")
        check_readable(broker, self.topic, self.queue_id)
        self.max_messages = min(max(get_int(cmd, "maxMsgNums", 32), 1), MAX_MESSAGES_PER_PULL)
        limit = broker.config.max_pull_bytes
        self.max_bytes = min(max(get_int(cmd, "maxBytes", limit), 1), limit)
        self.suspend_ms = min(max(get_int(cmd, "suspendTimeoutMs", 0), 0), broker.config.max_long_poll_ms)
        tags = get_list(cmd, "tags", None)
        self.tag_hashes = frozenset(tag_hash(str(t)) for t in tags) if tags else None
        end = get_int(cmd, "endOffset", -1)
        self.end_offset = end if end >= 0 else None
        # A read of one segment of a static topic's logical queue names it (logicQueueId, gen).
        self.logical_id = get_int(cmd, "logicQueueId", -1)
        self.gen = get_int(cmd, "gen", -1)
        self.epoch = get_int(cmd, "epoch", -1)
        self.segmented = self.logical_id >= 0 and broker.static.is_static(self.topic)
        if self.segmented:
            self._item()

    def _item(self) -> LogicQueueMappingItem:
        return self.broker.static.item_for_read(self.topic, self.logical_id, self.gen, self.queue_id, self.epoch)

    @property
    def key(self) -> tuple[str, int]:
        return (self.topic, self.queue_id)

    def read(self, offset: int) -> GetResult:
        """Read from ``offset``, never past the end of a sealed segment (checked on every read,
        so a seal that happens while a long poll waits is noticed)."""
        limit = self.max_messages
        if self.segmented:
            item = self._item()
            if item.sealed:
                if offset >= item.end_offset:
                    raise self.broker.static.stale_read(self.topic, self.logical_id, item, self.epoch)
                limit = min(limit, item.end_offset - offset)
        return self.broker.store.get(
            self.topic,
            self.queue_id,
            offset,
            max_messages=limit,
            max_bytes=self.max_bytes,
            tag_hashes=self.tag_hashes,
            end_offset=self.end_offset,
        )


def _response(cmd: RemotingCommand, result: GetResult) -> RemotingCommand:
    return cmd.response(
        _CODES[result.status],
        ext={"next": result.next_offset, "min": result.min_offset, "max": result.max_offset},
        body=result.body,
    )


async def _read_held(request: _PullRequest, offset: int, deadline: float) -> GetResult:
    """Read from ``offset``; while there is nothing new, hold until a send to the queue wakes
    us, ``deadline`` (monotonic) passes, or the broker shuts down."""
    hub = request.broker.longpoll
    while True:
        result = request.read(offset)
        remaining = deadline - time.monotonic()
        if _CODES[result.status] != ResponseCode.PULL_NOT_FOUND or remaining <= 0 or hub.closing:
            return result
        await hub.wait(request.key, remaining)


async def handle_pull(broker: Broker, cmd: RemotingCommand) -> RemotingCommand:
    request = _PullRequest(broker, cmd)
    result = await _read_held(request, request.offset, time.monotonic() + request.suspend_ms / 1000)
    return _response(cmd, result)


async def stream_pull(broker: Broker, cmd: RemotingCommand) -> AsyncIterator[RemotingCommand]:
    """A pull that keeps going: send each batch as soon as it is stored, for ``suspendTimeoutMs``.

    It ends at that deadline with a PULL_NOT_FOUND carrying the next offset, or at once on
    PULL_OFFSET_MOVED. gRPC flow control holds the loop back when the consumer is slower.
    """
    request = _PullRequest(broker, cmd)
    offset = request.offset
    deadline = time.monotonic() + max(request.suspend_ms, 1) / 1000
    while True:
        result = await _read_held(request, offset, deadline)
        yield _response(cmd, result)
        if _CODES[result.status] not in (ResponseCode.SUCCESS, ResponseCode.PULL_RETRY_IMMEDIATELY):
            return
        offset = result.next_offset
