"""Pulling a logical offset: which segment to ask, what to ask it, and how to read the answer.

Pure functions over a :class:`~rocketspark.client.logical.LogicalQueue`; the consumer does
the I/O. The rules (RIP-21, as RocketMQ 5.x's ``PullMessageProcessor`` applies them):

- logical offset X is read from the last segment starting at or before X, at physical offset
  ``X - logic_offset + start_offset``; never past a sealed segment's end;
- past a sealed segment's end (in the gap a remap leaves) reading continues at the next
  segment's start: the result is NO_MATCHED_MSG with ``next_offset`` there;
- out of range (OFFSET_ILLEGAL) is judged only at the ends of the chain: below the earliest
  retained message, or beyond the open segment's end. In the middle, a segment emptied by
  retention is skipped instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rocketspark.client.logical import LogicalQueue, Segment
from rocketspark.codec import ids
from rocketspark.codec.arrow import SCHEMA, to_record_batch
from rocketspark.codec.columns import Columns, decode
from rocketspark.codec.layout import RecordCorrupted
from rocketspark.codec.messages import labelled, read_messages
from rocketspark.codec.source import Source
from rocketspark.errors import DataCorruptedError, InvalidParameterError, NoRouteInfoError
from rocketspark.filtering import Selector, compile_cached
from rocketspark.protocol.codes import RequestCode, ResponseCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.types import MessageExt, PullResult, PullStatus
from rocketspark.remoting.client import check

STATUS = {
    ResponseCode.SUCCESS: PullStatus.FOUND,
    ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
    ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
    ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
}
STATUS_CODES = tuple(int(c) for c in STATUS if c != ResponseCode.SUCCESS)
UNKNOWN = -1  # min/max of a result that no broker was asked for


def parse_tags(tags: str | list[str] | None) -> list[str] | None:
    """``"A || B"`` or ``["A", "B"]`` -> ``["A", "B"]``; None, ``""`` or ``"*"`` -> no filter."""
    if tags is None:
        return None
    items = tags.split("||") if isinstance(tags, str) else list(tags)
    cleaned = [t.strip() for t in items if t and t.strip()]
    if not cleaned or "*" in cleaned:
        return None
    return cleaned


def parse_filter(tags: str | list[str] | None, sql: str | None) -> tuple[list[str] | None, Selector | None]:
    """A subscription's filter: tags (``parse_tags``) or an SQL92 expression, compiled here so
    that a bad one is refused before any request, with where it goes wrong."""
    if sql is None:
        return parse_tags(tags), None
    if tags is not None:
        raise InvalidParameterError("a subscription filters by tags or by an SQL92 expression, not both")
    return None, compile_cached(sql)


@dataclass(frozen=True, slots=True)
class PullPlan:
    """One pull request against one segment, ready to send."""

    queue: LogicalQueue
    segment: Segment
    offset: int  # logical offset asked for
    address: str
    request: RemotingCommand
    wanted: list[str] | None
    budget_ms: int
    selector: Selector | None = None


def segment_request_ext(queue: LogicalQueue, segment: Segment) -> dict[str, Any]:
    """Header fields naming a segment: a static topic's broker checks them against its mapping."""
    ext: dict[str, Any] = {"topic": queue.topic, "queueId": segment.queue_id}
    if queue.static:
        ext.update(logicQueueId=queue.queue_id, gen=segment.gen, epoch=queue.epoch)
    return ext


def plan_pull(
    queue: LogicalQueue,
    offset: int,
    max_messages: int,
    *,
    end: int | None = None,
    max_bytes: int | None = None,
    wanted: list[str] | None = None,
    selector: Selector | None = None,
    long_poll_ms: int = 0,
    timeout_ms: int,
) -> PullPlan | PullResult:
    """The request to send for logical ``offset``, or the result already known without one.
    With ``end`` (logical, exclusive) the broker reads nothing at or past it."""
    if not queue.segments:
        raise NoRouteInfoError(
            f"logical queue {queue.queue_id} of {queue.topic} has no segment in the route (a remap may be under "
            "way); try again shortly"
        )
    first = queue.segments[0]
    if offset < first.logic_offset:
        return PullResult(PullStatus.OFFSET_ILLEGAL, [], first.logic_offset, first.logic_offset, UNKNOWN)
    segment = queue.segment_for(offset)
    sealed_end = segment.logical_end
    if sealed_end is not None and offset >= sealed_end:
        return PullResult(PullStatus.NO_MATCHED_MSG, [], queue.after_end(segment), UNKNOWN, UNKNOWN)
    address = segment.require_address(queue.topic)
    physical = segment.physical(offset)
    stop = segment.end_offset if segment.sealed else None
    if end is not None:
        stop = segment.physical(end) if stop is None else min(stop, segment.physical(end))
    count = max_messages if stop is None else max(1, min(max_messages, stop - physical))
    ext = segment_request_ext(queue, segment)
    ext.update(queueOffset=physical, maxMsgNums=count, suspendTimeoutMs=long_poll_ms)
    if end is not None and stop is not None:
        ext["endOffset"] = stop
    if max_bytes is not None:
        ext["maxBytes"] = max_bytes
    if wanted:
        ext["tags"] = wanted
    if selector is not None:
        ext["sql"] = selector.expression
    request = RemotingCommand.request(RequestCode.PULL_MESSAGE, ext)
    return PullPlan(queue, segment, offset, address, request, wanted, timeout_ms + long_poll_ms, selector)


def next_logical(plan: PullPlan, next_physical: int) -> int:
    """The logical offset to read next, moving on to the following segment at a sealed end."""
    segment = plan.segment
    if segment.sealed and next_physical >= segment.end_offset:
        return plan.queue.after_end(segment)
    return segment.logical(next_physical)


def read_columns(plan: PullPlan, body: bytes, *, verify: bool, end: int | None = None) -> Columns:
    """The messages of a pull's body (one response's, or several joined) as columns, from the
    logical offset the plan asked for up to ``end`` (logical, exclusive), with the wanted tags
    or passing the SQL92 filter: whole batches come back (the broker's tag filter goes by each
    batch's summary, its SQL92 filter keeps a batch with one message that passes)."""
    try:
        columns = decode(body, verify=verify)
    except RecordCorrupted as exc:
        raise _damaged(plan, exc) from None
    columns = columns.select(plan.segment.physical(plan.offset), _stop(plan, end), plan.wanted)
    if plan.selector is None:
        return columns
    passed = plan.selector.mask(columns)
    return columns if passed.all() else columns.take(passed)


def _stop(plan: PullPlan, end: int | None) -> int | None:
    """The physical offset a read of ``plan`` stops before, for a logical ``end`` (None: none)."""
    return None if end is None else plan.segment.physical(end)


def _damaged(plan: PullPlan, exc: RecordCorrupted) -> DataCorruptedError:
    """What a consumer is told of a record that failed its checks: where it was read."""
    segment, queue = plan.segment, plan.queue
    return DataCorruptedError(
        f"a record of {queue.topic} queue {queue.queue_id} (read from offset {plan.offset} on broker "
        f"{segment.broker_name}) failed its integrity check: {exc}; the broker's copy is damaged"
    )


def messages_of(
    plan: PullPlan, body: bytes, source: Source, *, verify: bool, end: int | None = None
) -> list[MessageExt]:
    """``read_columns`` as message objects labelled from ``source``; a few records (a consumer
    following a queue gets one a message) are read straight to messages
    (``codec.messages.read_messages``), without numpy's fixed cost. An SQL92 filter needs the
    columns."""
    if plan.selector is not None:
        return labelled(read_columns(plan, body, verify=verify, end=end), source)
    first = plan.segment.physical(plan.offset)
    try:
        return read_messages(body, source, verify=verify, first=first, stop=_stop(plan, end), wanted=plan.wanted)
    except RecordCorrupted as exc:
        raise _damaged(plan, exc) from None


def finish_pull(
    plan: PullPlan, response: RemotingCommand, *, verify: bool, columnar: bool = False, end: int | None = None
) -> PullResult:
    """Translate a segment's pull response into a logical PullResult: its messages as
    MessageExt objects, or (``columnar``) as one Arrow record batch; none at or past ``end``."""
    check(response, *STATUS_CODES)
    status = STATUS[ResponseCode(response.code)]
    segment, queue = plan.segment, plan.queue
    ext = response.ext
    nxt, low, high = int(ext["next"]), int(ext["min"]), int(ext["max"])
    is_first = segment is queue.segments[0]
    is_leader = segment is queue.leader
    messages: list[MessageExt] = []
    batch = None
    if status is PullStatus.FOUND:
        host = ids.store_host(plan.address)  # offset ids name the broker the messages were read from
        source = Source(queue.topic, queue.queue_id, segment.offset_delta, segment.broker_name, host)
        if columnar:
            columns = read_columns(plan, response.body, verify=verify, end=end)
            batch = to_record_batch(columns, source, SCHEMA)
            found = len(columns)
        else:
            messages = messages_of(plan, response.body, source, verify=verify, end=end)
            found = len(messages)
        if not found:
            status = PullStatus.NO_MATCHED_MSG
    next_offset = next_logical(plan, nxt)
    if status is PullStatus.OFFSET_ILLEGAL:
        too_small = segment.physical(plan.offset) < low
        emptied = segment.sealed and low >= segment.end_offset
        if too_small and emptied:
            next_offset = queue.after_end(segment)  # retention emptied this segment: go on to the next
        if (too_small and not is_first) or (emptied and not is_first):
            status = PullStatus.NO_MATCHED_MSG  # a hole in the middle of the chain is not out of range
        elif not too_small and not is_leader:
            status = PullStatus.NO_MATCHED_MSG
    if end is not None and status is not PullStatus.OFFSET_ILLEGAL:  # that one says where the queue is
        next_offset = min(next_offset, end)
    min_offset = segment.logical(low) if is_first else queue.segments[0].logic_offset
    max_offset = segment.logical(high) if is_leader or not queue.static else UNKNOWN
    return PullResult(status, messages, next_offset, min_offset, max_offset, batch)
