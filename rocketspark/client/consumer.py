"""The pull consumer: read any queue from any offset, and keep a group's progress on the broker.

Queues are addressed by ``queue_id`` in the topic's queue view: the topic's queues ordered by
broker name, then physical queue id (for a topic on one broker that is simply its queue id).
Pass ``broker_name`` to address a broker's physical queue directly.

Expected outcomes are statuses, never exceptions (RocketMQ's ``PullStatus``): FOUND,
NO_NEW_MSG (caught up), NO_MATCHED_MSG (everything scanned was filtered out; continue at
``next_offset``) and OFFSET_ILLEGAL (below min or above max; ``next_offset`` says where the
queue really is).
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Iterator
from dataclasses import dataclass

from rocketspark.client.base import ClientBase
from rocketspark.client.routes import QueueRef, read_queues
from rocketspark.errors import ConnectError, DataCorruptedError, InvalidParameterError, TopicNotExistError
from rocketspark.protocol.codes import RequestCode, ResponseCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.record import RecordCorrupted
from rocketspark.protocol.types import PullResult, PullStatus, decode_records
from rocketspark.remoting.client import DEFAULT_TIMEOUT_MS, check

_STATUS = {
    ResponseCode.SUCCESS: PullStatus.FOUND,
    ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
    ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
    ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
}
_STATUS_CODES = tuple(int(c) for c in _STATUS if c != ResponseCode.SUCCESS)


def parse_tags(tags: str | list[str] | None) -> list[str] | None:
    """``"A || B"`` or ``["A", "B"]`` -> ``["A", "B"]``; None, ``""`` or ``"*"`` -> no filter."""
    if tags is None:
        return None
    items = tags.split("||") if isinstance(tags, str) else list(tags)
    cleaned = [t.strip() for t in items if t and t.strip()]
    if not cleaned or "*" in cleaned:
        return None
    return cleaned


@dataclass(frozen=True, slots=True)
class Located:
    address: str
    ref: QueueRef


@dataclass(frozen=True, slots=True)
class _PullSpec:
    topic: str
    queue_id: int
    offset: int
    where: Located
    wanted: list[str] | None
    request: RemotingCommand
    budget_ms: int


class Consumer(ClientBase):
    def __init__(
        self,
        nameserver: str | list[str] | None = None,
        *,
        timeout_ms: int = DEFAULT_TIMEOUT_MS,
        verify_crc: bool = True,
        poll_interval_ms: int = 30_000,
    ) -> None:
        super().__init__(nameserver, timeout_ms=timeout_ms, poll_interval_ms=poll_interval_ms)
        self.verify_crc = verify_crc

    def queues(self, topic: str) -> list[QueueRef]:
        """The topic's readable queues in view order; ``queue_id`` indexes this list."""
        return read_queues(self.routes.get(topic))

    def locate(self, topic: str, queue_id: int, broker_name: str | None = None) -> Located:
        route = self.routes.get(topic)
        if broker_name is not None:
            ref = QueueRef(broker_name, queue_id)
        else:
            view = read_queues(route)
            if not 0 <= queue_id < len(view):
                raise InvalidParameterError(
                    f'queue {queue_id} does not exist: topic "{topic}" has {len(view)} readable queues '
                    f"(0-{len(view) - 1})"
                )
            ref = view[queue_id]
        return Located(self.broker_address(route, ref.broker_name), ref)

    def _call(
        self, topic: str, where: Located, request: RemotingCommand, timeout_ms: int | None, *ok: int
    ) -> RemotingCommand:
        try:
            return self.call(where.address, request, timeout_ms, *ok)
        except (ConnectError, TopicNotExistError):
            self.routes.invalidate(topic)  # the broker moved or the topic changed: re-learn next time
            raise

    def _pull_spec(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_messages: int,
        broker_name: str | None,
        max_bytes: int | None,
        tags: str | list[str] | None,
        long_poll_ms: int,
        timeout_ms: int | None,
    ) -> _PullSpec:
        where = self.locate(topic, queue_id, broker_name)
        wanted = parse_tags(tags)
        ext: dict[str, object] = {
            "topic": topic,
            "queueId": where.ref.queue_id,
            "queueOffset": offset,
            "maxMsgNums": max_messages,
            "suspendTimeoutMs": long_poll_ms,
        }
        if max_bytes is not None:
            ext["maxBytes"] = max_bytes
        if wanted:
            ext["tags"] = wanted
        budget = (timeout_ms or self.timeout_ms) + long_poll_ms
        return _PullSpec(
            topic, queue_id, offset, where, wanted, RemotingCommand.request(RequestCode.PULL_MESSAGE, ext), budget
        )

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
        long_poll_ms: int = 0,
        timeout_ms: int | None = None,
    ) -> PullResult:
        """Read up to ``max_messages`` from ``offset``; wait up to ``long_poll_ms`` for new ones."""
        spec = self._pull_spec(
            topic, queue_id, offset, max_messages, broker_name, max_bytes, tags, long_poll_ms, timeout_ms
        )
        response = self._call(topic, spec.where, spec.request, spec.budget_ms, *_STATUS_CODES)
        return self._finish(spec, response)

    def _pull_async(self, spec: _PullSpec) -> concurrent.futures.Future[RemotingCommand]:
        return self.remoting.invoke_async(spec.where.address, spec.request, spec.budget_ms)

    def _finish(self, spec: _PullSpec, response: RemotingCommand) -> PullResult:
        """Turn a pull response into a PullResult: status, decoded and CRC-checked messages."""
        check(response, *_STATUS_CODES)
        status = _STATUS[ResponseCode(response.code)]
        messages = []
        if status is PullStatus.FOUND:
            try:
                messages = decode_records(
                    response.body,
                    spec.topic,
                    spec.where.ref.broker_name,
                    queue_id=spec.queue_id,
                    verify=self.verify_crc,
                )
            except RecordCorrupted as exc:
                raise DataCorruptedError(
                    f"a record of {spec.topic} queue {spec.queue_id} (read from offset {spec.offset} on broker "
                    f"{spec.where.ref.broker_name}) failed its integrity check: {exc}; the broker's copy is damaged",
                ) from None
            if spec.wanted:
                allowed = set(spec.wanted)
                messages = [m for m in messages if m.tags in allowed]  # hashes can collide; tags decide
                if not messages:
                    status = PullStatus.NO_MATCHED_MSG
        ext_in = response.ext
        return PullResult(status, messages, int(ext_in["next"]), int(ext_in["min"]), int(ext_in["max"]))

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
        timeout_ms: int | None = None,
    ) -> Iterator[PullResult]:
        """Read ``[start, end)`` (or until caught up) as a stream of pulls.

        The next pull is in flight while the caller decodes and uses the current one, so the
        broker's work and the network overlap with the caller's. Stops early at an
        OFFSET_ILLEGAL result, which it yields so the caller can see where the queue is.
        """
        offset = start
        spec = self._pull_spec(
            topic, queue_id, offset, self._span(offset, end, batch), broker_name, max_bytes, tags, 0, timeout_ms
        )
        pending = self._pull_async(spec)
        while True:
            try:
                response = pending.result()
            except (ConnectError, TopicNotExistError):
                self.routes.invalidate(topic)
                raise
            code = response.code
            nxt = int(response.ext.get("next", offset)) if isinstance(response.ext.get("next"), int) else offset
            more = code in (ResponseCode.SUCCESS, ResponseCode.PULL_RETRY_IMMEDIATELY) and (end is None or nxt < end)
            current = spec
            if more:
                spec = self._pull_spec(
                    topic, queue_id, nxt, self._span(nxt, end, batch), broker_name, max_bytes, tags, 0, timeout_ms
                )
                pending = self._pull_async(spec)
            result = self._finish(current, response)
            if end is not None and result.messages and result.messages[-1].queue_offset >= end:
                result = PullResult(
                    result.status,
                    [m for m in result.messages if m.queue_offset < end],
                    min(result.next_offset, end),
                    result.min_offset,
                    result.max_offset,
                )
            yield result
            if not more:
                return
            offset = nxt

    def follow(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        *,
        max_messages: int = 256,
        broker_name: str | None = None,
        max_bytes: int | None = None,
        tags: str | list[str] | None = None,
        window_ms: int = 30_000,
    ) -> Iterator[PullResult]:
        """Follow a queue from ``offset``: yield each batch the moment the broker stores it.

        One streaming pull carries many batches, so a new message costs one network hop
        instead of a pull round trip; the stream is renewed every ``window_ms``. Iterate for
        as long as you want messages; stop iterating (or ``close()`` the generator) to end it.
        An OFFSET_ILLEGAL result is yielded and ends the iteration.
        """
        while True:
            spec = self._pull_spec(topic, queue_id, offset, max_messages, broker_name, max_bytes, tags, window_ms, None)
            responses = self.remoting.invoke_stream(spec.where.address, spec.request, window_ms + self.timeout_ms)
            try:
                for response in responses:
                    result = self._finish(spec, response)
                    if result.status is PullStatus.OFFSET_ILLEGAL:
                        yield result
                        return
                    offset = result.next_offset
                    if result.messages:
                        yield result
            except (ConnectError, TopicNotExistError):
                self.routes.invalidate(topic)
                raise
            finally:
                responses.cancel()

    @staticmethod
    def _span(offset: int, end: int | None, batch: int) -> int:
        return batch if end is None else max(1, min(batch, end - offset))

    def _offset_request(self, code: int, topic: str, queue_id: int, broker_name: str | None, **extra: object) -> int:
        where = self.locate(topic, queue_id, broker_name)
        request = RemotingCommand.request(code, {"topic": topic, "queueId": where.ref.queue_id, **extra})
        return int(self._call(topic, where, request, None).ext["offset"])

    def min_offset(self, topic: str, queue_id: int, *, broker_name: str | None = None) -> int:
        return self._offset_request(RequestCode.GET_MIN_OFFSET, topic, queue_id, broker_name)

    def max_offset(self, topic: str, queue_id: int, *, broker_name: str | None = None) -> int:
        """One past the newest message: the offset the next message will get."""
        return self._offset_request(RequestCode.GET_MAX_OFFSET, topic, queue_id, broker_name)

    def offset_for_timestamp(
        self, topic: str, queue_id: int, timestamp_ms: int, *, broker_name: str | None = None
    ) -> int:
        """The first offset stored at or after ``timestamp_ms`` (the max offset if none)."""
        return self._offset_request(
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, topic, queue_id, broker_name, timestamp=timestamp_ms
        )

    def commit_offset(
        self, group: str, topic: str, queue_id: int, offset: int, *, broker_name: str | None = None
    ) -> None:
        where = self.locate(topic, queue_id, broker_name)
        ext = {"consumerGroup": group, "topic": topic, "queueId": where.ref.queue_id, "commitOffset": offset}
        self._call(topic, where, RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, ext), None)

    def committed_offset(self, group: str, topic: str, queue_id: int, *, broker_name: str | None = None) -> int | None:
        """The group's committed offset, or None if it never committed one."""
        where = self.locate(topic, queue_id, broker_name)
        ext = {"consumerGroup": group, "topic": topic, "queueId": where.ref.queue_id}
        request = RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET, ext)
        response = self._call(topic, where, request, None, ResponseCode.QUERY_NOT_FOUND)
        return None if response.code == ResponseCode.QUERY_NOT_FOUND else int(response.ext["offset"])
