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

from dataclasses import dataclass

from rocketspark.client.base import ClientBase
from rocketspark.client.routes import QueueRef, read_queues
from rocketspark.errors import ConnectError, DataCorruptedError, InvalidParameterError, TopicNotExistError
from rocketspark.protocol.codes import RequestCode, ResponseCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.record import RecordCorrupted
from rocketspark.protocol.types import PullResult, PullStatus, decode_records
from rocketspark.remoting.client import DEFAULT_TIMEOUT_MS

_STATUS = {
    ResponseCode.SUCCESS: PullStatus.FOUND,
    ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
    ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
    ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
}


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
                    f'queue {queue_id} does not exist: topic "{topic}" has {len(view)} readable queues (0-{len(view) - 1})'
                )
            ref = view[queue_id]
        return Located(self.broker_address(route, ref.broker_name), ref)

    def _call(self, topic: str, where: Located, request: RemotingCommand, timeout_ms: int | None, *ok: int) -> RemotingCommand:
        try:
            return self.call(where.address, request, timeout_ms, *ok)
        except (ConnectError, TopicNotExistError):
            self.routes.invalidate(topic)  # the broker moved or the topic changed: re-learn next time
            raise

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
        request = RemotingCommand.request(RequestCode.PULL_MESSAGE, ext)
        budget = (timeout_ms or self.timeout_ms) + long_poll_ms
        response = self._call(topic, where, request, budget, *[c for c in _STATUS if c != ResponseCode.SUCCESS])
        status = _STATUS[ResponseCode(response.code)]
        messages = []
        if status is PullStatus.FOUND:
            try:
                messages = decode_records(
                    response.body, topic, where.ref.broker_name, queue_id=queue_id, verify=self.verify_crc
                )
            except RecordCorrupted as exc:
                raise DataCorruptedError(
                    f'a record of {topic} queue {queue_id} (from offset {offset}, broker {where.ref.broker_name}) '
                    f"failed its integrity check: {exc}; the broker's copy is damaged",
                ) from None
            if wanted:
                allowed = set(wanted)
                messages = [m for m in messages if m.tags in allowed]  # hashes can collide; tags decide
                if not messages:
                    status = PullStatus.NO_MATCHED_MSG
        ext_in = response.ext
        return PullResult(status, messages, int(ext_in["next"]), int(ext_in["min"]), int(ext_in["max"]))

    def _offset_request(self, code: int, topic: str, queue_id: int, broker_name: str | None, **extra: object) -> int:
        where = self.locate(topic, queue_id, broker_name)
        request = RemotingCommand.request(code, {"topic": topic, "queueId": where.ref.queue_id, **extra})
        return int(self._call(topic, where, request, None).ext["offset"])

    def min_offset(self, topic: str, queue_id: int, *, broker_name: str | None = None) -> int:
        return self._offset_request(RequestCode.GET_MIN_OFFSET, topic, queue_id, broker_name)

    def max_offset(self, topic: str, queue_id: int, *, broker_name: str | None = None) -> int:
        """One past the newest message: the offset the next message will get."""
        return self._offset_request(RequestCode.GET_MAX_OFFSET, topic, queue_id, broker_name)

    def offset_for_timestamp(self, topic: str, queue_id: int, timestamp_ms: int, *, broker_name: str | None = None) -> int:
        """The first offset stored at or after ``timestamp_ms`` (the max offset if none)."""
        return self._offset_request(
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, topic, queue_id, broker_name, timestamp=timestamp_ms
        )

    def commit_offset(self, group: str, topic: str, queue_id: int, offset: int, *, broker_name: str | None = None) -> None:
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
