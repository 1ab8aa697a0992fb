"""The pull consumer: read any queue from any offset, and keep a group's progress on the broker.

Every topic is read as logical queues (see :mod:`rocketspark.client.logical`): a static
topic's logical queues, whose segments may sit on several brokers, or a normal topic's queues
in broker-name order. ``queue_id`` is that logical id and offsets are logical offsets; for a
normal topic they are simply the queue's offsets. Pass ``broker_name`` to read one broker's
physical queue directly.

Expected outcomes are statuses, never exceptions (RocketMQ's ``PullStatus``): FOUND,
NO_NEW_MSG (caught up), NO_MATCHED_MSG (nothing to return here; continue at ``next_offset``:
all filtered out, or the gap after a remap) and OFFSET_ILLEGAL (before the first or after the
last message; ``next_offset`` says where the queue is). A client whose mapping of a static
topic is out of date is told so by the broker and re-reads the route before retrying.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from typing import Unpack

from rocketspark.client.base import ClientKwargs
from rocketspark.client.pipeline import Pipeline
from rocketspark.client.pulling import PullPlan, finish_pull, parse_filter, plan_pull
from rocketspark.client.queue_client import STALE, QueueClient
from rocketspark.errors import ConnectError, TopicNotExistError
from rocketspark.protocol.types import PullResult, PullStatus
from rocketspark.remoting.client import DEFAULT_TIMEOUT_MS, LocalPeer


class Consumer(QueueClient):
    def __init__(
        self,
        nameserver: str | list[str] | None = None,
        *,
        timeout_ms: int = DEFAULT_TIMEOUT_MS,
        verify_crc: bool = True,
        local: LocalPeer | None = None,
        labels: dict[str, str] | None = None,
        **options: Unpack[ClientKwargs],
    ) -> None:
        """``labels``: fields every pull carries for the brokers' message trace
        (``consumerGroup``: the group it reads for; ``via``: how, as the trace shows it)."""
        super().__init__(nameserver, timeout_ms=timeout_ms, local=local, **options)
        self.verify_crc = verify_crc
        self.labels = dict(labels or {})

    def _labelled(self, plan: PullPlan | PullResult) -> PullPlan | PullResult:
        """A planned pull with the fields this consumer's pulls carry for the trace."""
        if self.labels and isinstance(plan, PullPlan):
            plan.request.ext.update(self.labels)
        return plan

    def _send(self, plan: PullPlan) -> PullResult:
        self._labelled(plan)
        response = self.remoting.invoke(plan.address, plan.request, plan.budget_ms)
        return finish_pull(plan, response, verify=self.verify_crc)

    # -- pulling ------------------------------------------------------------------------------

    def pull(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_messages: int = 32,
        *,
        broker_name: str | None = None,
        max_bytes: int | None = None,
        tags: str | list[str] | None = None,
        sql: str | None = None,
        long_poll_ms: int = 0,
        timeout_ms: int | None = None,
    ) -> PullResult:
        """Read from ``offset``, about ``max_messages`` (whole batches come back: a pull may
        return more, up to the end of the batch holding the last); wait up to ``long_poll_ms``
        for new ones. Only messages with one of ``tags`` (``"a || b"``), or those the SQL92
        expression ``sql`` selects, are returned (RocketMQ's ``MessageSelector.byTag`` and
        ``bySql``); a bad expression raises IllegalFilterExpressionError saying where."""
        wanted, selector = parse_filter(tags, sql)

        def attempt() -> PullResult:
            queue = self.queue(topic, queue_id, broker_name)
            plan = plan_pull(
                queue,
                offset,
                max_messages,
                max_bytes=max_bytes,
                wanted=wanted,
                selector=selector,
                long_poll_ms=long_poll_ms,
                timeout_ms=timeout_ms or self.timeout_ms,
            )
            return plan if isinstance(plan, PullResult) else self._send(plan)

        return self._retrying(topic, attempt)

    def iter_range(
        self,
        topic: str,
        queue_id: int,
        start: int,
        end: int | None = None,
        *,
        batch: int = 2000,
        broker_name: str | None = None,
        max_bytes: int | None = None,
        tags: str | list[str] | None = None,
        sql: str | None = None,
        timeout_ms: int | None = None,
        columnar: bool = False,
    ) -> Iterator[PullResult]:
        """Read ``[start, end)`` (or until caught up) as a stream of pulls, across segments.
        With ``columnar`` each result carries its messages as one Arrow record batch
        (``result.batch``, schema ``rocketspark.codec.arrow.SCHEMA``) instead of MessageExt
        objects: decoded with no per-message Python, several times faster.

        The next pull is in flight while the caller uses the current one, so the broker's work
        and the network overlap with the caller's. An OFFSET_ILLEGAL result is yielded and ends
        the iteration (``next_offset`` says where the queue is).
        """
        wanted, selector = parse_filter(tags, sql)
        budget = timeout_ms or self.timeout_ms

        def plan_at(offset: int) -> PullPlan | PullResult:
            queue = self.queue(topic, queue_id, broker_name)
            return plan_pull(
                queue, offset, batch, end=end, max_bytes=max_bytes, wanted=wanted, selector=selector, timeout_ms=budget
            )

        pipeline = Pipeline(self.remoting, lambda offset: self._labelled(plan_at(offset)), end=end)
        offset = start
        while end is None or offset < end:
            try:
                pulled = pipeline.pull(offset)
            except ConnectError:
                self.routes.invalidate(topic)
                raise
            if isinstance(pulled, PullResult):
                result = pulled
            else:
                try:
                    result = finish_pull(*pulled, verify=self.verify_crc, columnar=columnar, end=end)
                except STALE:
                    self.routes.invalidate(topic)  # re-planned from the new route on the next turn
                    continue
            terminal = result.status in (PullStatus.NO_NEW_MSG, PullStatus.OFFSET_ILLEGAL)
            if result.count or terminal:
                yield result
            if terminal or result.next_offset <= offset:
                return
            offset = result.next_offset

    def follow(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        *,
        max_messages: int = 256,
        max_bytes: int | None = None,
        tags: str | list[str] | None = None,
        sql: str | None = None,
        window_ms: int = 30_000,
    ) -> Iterator[PullResult]:
        """Follow a logical queue from ``offset``: yield each batch the moment it is stored.

        Sealed segments are read through with ``iter_range``; the open segment is followed with
        one streaming pull that carries many batches, so a new message costs one network hop
        instead of a pull round trip (renewed every ``window_ms``). A remap is followed to the
        new segment. Stop iterating to end it. OFFSET_ILLEGAL is yielded and ends it.
        """
        wanted, selector = parse_filter(tags, sql)
        while True:
            queue = self.queue(topic, queue_id)
            segment = queue.segment_for(offset) if queue.segments else None
            if segment is not None and segment.logical_end is not None:
                if offset < segment.logical_end:
                    end = segment.logical_end
                    ranged = self.iter_range(topic, queue_id, offset, end, max_bytes=max_bytes, tags=tags, sql=sql)
                    if (yield from _until_illegal(ranged)):
                        return
                offset = queue.after_end(segment)
                continue
            plan = self._labelled(
                plan_pull(
                    queue,
                    offset,
                    max_messages,
                    max_bytes=max_bytes,
                    wanted=wanted,
                    selector=selector,
                    long_poll_ms=window_ms,
                    timeout_ms=self.timeout_ms,
                )
            )
            followed = yield from self._follow_open(topic, plan, offset)
            if followed is None:
                return
            offset = followed

    def _follow_open(
        self, topic: str, plan: PullPlan | PullResult, offset: int
    ) -> Generator[PullResult, None, int | None]:
        """Follow the open segment from ``offset`` with one streaming pull; returns the offset
        to go on from (the stream ended, or its segment was sealed under it), None after
        OFFSET_ILLEGAL. A result known without a pull (``plan``) only says where to go on."""
        if isinstance(plan, PullResult):
            if plan.status is PullStatus.OFFSET_ILLEGAL:
                yield plan
                return None
            return plan.next_offset
        responses = self.remoting.invoke_stream(plan.address, plan.request, plan.budget_ms)
        try:
            for response in responses:
                result = finish_pull(plan, response, verify=self.verify_crc)
                if result.status is PullStatus.OFFSET_ILLEGAL:
                    yield result
                    return None
                offset = result.next_offset
                if result.messages:
                    yield result
        except STALE:
            self.routes.invalidate(topic)  # the segment was sealed under us: re-read the mapping
        except (ConnectError, TopicNotExistError):
            self.routes.invalidate(topic)
            raise
        finally:
            responses.cancel()
        return offset


def _until_illegal(results: Iterator[PullResult]) -> Generator[PullResult, None, bool]:
    """The results that carry messages, and OFFSET_ILLEGAL, which ends them: True then."""
    for result in results:
        if result.status is PullStatus.OFFSET_ILLEGAL:
            yield result
            return True
        if result.messages:
            yield result
    return False
