"""One send on the wire: the request for a target queue, and the SendResult its answer makes.

Kept apart from the producer's choices (which queue, how often, how long) so that every way
to send (``send``, ``send_batch``, ``send_oneway``, a first attempt delivered by the caller)
writes the same request and reads the same answer, and its messages carry the same
properties (``stamp_sharding_keys``).
"""

from __future__ import annotations

from collections.abc import Sequence

from rocketspark.client.selection import PublishInfo, Target
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.properties import SHARDING_KEY
from rocketspark.protocol.types import Message, SendResult, SendStatus


def stamp_sharding_keys(messages: Sequence[Message]) -> None:
    """Write a keyed message's sharding key as its ``__SHARDINGKEY`` property, as RocketMQ's
    ordered producers do (ONS's ``OrderProducer``; a v5 message group, written by the proxy):
    what the Spark sink writes, and what the v2 endpoint's FIFO pop, v5 consumers' message
    group and the metrics' ``fifo`` type read. ``messages`` go to one queue, with one key (the
    first's tells, so that unkeyed batches cost nothing here); a property set by hand is kept."""
    key = messages[0].sharding_key if messages else None
    if key is not None:
        for message in messages:
            message.properties.setdefault(SHARDING_KEY, key)


def send_request(
    info: PublishInfo, topic: str, ref: Target, body: bytes, *, batch: bool, queue_nums: int
) -> RemotingCommand:
    """The request sending ``body`` to ``ref``: a static topic's logical queue (with the epoch
    the broker checks it leads), or a physical one; through the auto-create template, with the
    queue count (``queue_nums``) the broker creates the topic with."""
    ext: dict[str, object] = {"topic": topic}
    if ref.logical_id is not None:
        ext.update(logicQueueId=ref.logical_id, epoch=ref.epoch)
    else:
        ext["queueId"] = ref.queue_id
    if info.template:
        ext["defaultTopic"] = info.template
        ext["defaultTopicQueueNums"] = queue_nums
    code = RequestCode.SEND_BATCH_MESSAGE if batch else RequestCode.SEND_MESSAGE
    return RemotingCommand.request(code, ext, body)


def send_result(topic: str, ref: Target, response: RemotingCommand, own: dict[int, str] | None = None) -> SendResult:
    """The answer as a SendResult. Its ids: the broker names the first stored message's
    offset id and the client id its record gives it; ``own`` (by place in what was sent)
    are the messages that carried a UNIQ_KEY of their own, which they keep."""
    ext = response.ext
    skipped = int(ext.get("duplicates", 0))
    first = str(ext.get("firstMsgId", ""))
    if own and skipped:  # the broker stored only the messages after the duplicates
        own = {i - skipped: v for i, v in own.items() if i >= skipped} or None
    return SendResult(
        status=_status(ext.get("status", "SEND_OK")),
        msg_id=(own or {}).get(0) or first,
        topic=topic,
        broker_name=ref.broker_name,
        queue_id=int(ext.get("logicQueueId", ext["queueId"])),
        queue_offset=int(ext["queueOffset"]),
        count=int(ext.get("count", 1)),
        duplicates=skipped,
        offset_msg_id=str(ext["msgId"]),
        batch_first_id=first,
        own_ids=own,
    )


_STATUSES = {status.value: status for status in SendStatus}


def _status(value: object) -> SendStatus:
    """The answer's status; a dictionary look-up, where calling the Enum runs as Python."""
    status = _STATUSES.get(str(value))
    return status if status is not None else SendStatus(value)
