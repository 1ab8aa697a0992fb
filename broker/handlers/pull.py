"""PULL_MESSAGE: read a range of one queue, holding the request while there is nothing new.

Header fields: ``topic``, ``queueId``, ``queueOffset``, ``maxMsgNums`` (default 32),
``maxBytes``, ``suspendTimeoutMs`` (long poll; 0 answers at once), ``tags`` (list; the
server-side tag filter), and optionally ``consumerGroup`` + ``commitOffset`` to commit the
group's progress in the same round trip, as RocketMQ's pull does.

Outcomes that are not faults are response codes, not errors: PULL_NOT_FOUND (nothing new),
PULL_RETRY_IMMEDIATELY (everything scanned was filtered out), PULL_OFFSET_MOVED (the offset
is outside [min, max]; ``next`` says where to go). The body is the stored records.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from broker.store.recovery import tag_hash
from broker.store.store import GetResult, GetStatus
from rocketspark.errors import InvalidParameterError, NoPermissionError, TopicNotExistError
from rocketspark.protocol.codes import RequestCode, ResponseCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.headers import get_int, get_list, get_str
from rocketspark.protocol.types import Perm

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
    async def pull(cmd: RemotingCommand) -> RemotingCommand:
        return await handle_pull(broker, cmd)

    broker.dispatcher.register(RequestCode.PULL_MESSAGE, pull)


def check_readable(broker: Broker, topic: str, queue_id: int) -> None:
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


async def handle_pull(broker: Broker, cmd: RemotingCommand) -> RemotingCommand:
    topic = get_str(cmd, "topic")
    queue_id = get_int(cmd, "queueId")
    offset = get_int(cmd, "queueOffset")
    check_readable(broker, topic, queue_id)
    max_messages = min(max(get_int(cmd, "maxMsgNums", 32), 1), MAX_MESSAGES_PER_PULL)
    max_bytes = min(max(get_int(cmd, "maxBytes", broker.config.max_pull_bytes), 1), broker.config.max_pull_bytes)
    suspend_ms = min(max(get_int(cmd, "suspendTimeoutMs", 0), 0), broker.config.max_long_poll_ms)
    tags = get_list(cmd, "tags", None)
    tag_hashes = frozenset(tag_hash(str(t)) for t in tags) if tags else None
    group = get_str(cmd, "consumerGroup", "")
    commit = get_int(cmd, "commitOffset", -1)
    if group and commit >= 0:
        broker.offsets.commit(group, topic, queue_id, commit)

    def read() -> GetResult:
        return broker.store.get(
            topic, queue_id, offset, max_messages=max_messages, max_bytes=max_bytes, tag_hashes=tag_hashes
        )

    result = read()
    deadline = time.monotonic() + suspend_ms / 1000
    while _CODES[result.status] == ResponseCode.PULL_NOT_FOUND and suspend_ms > 0:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        await broker.longpoll.wait((topic, queue_id), remaining)
        result = read()
    return cmd.response(
        _CODES[result.status],
        ext={"next": result.next_offset, "min": result.min_offset, "max": result.max_offset},
        body=result.body,
    )
