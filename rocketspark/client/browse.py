"""A topic's messages by store time, newest first, a page at a time (mqadmin's printMsg; the
console's message list).

A page is made without reading the whole range: each logical queue's bounds come from the
brokers' search by timestamp (the one ``reset_offset`` uses), each queue is read backwards
from its top in chunks of about a page, and the queues' newest messages are merged by store
time. The cursor says, per queue, where the next (older) page goes on: it is a compact string
(URL-safe base64 of a small JSON document) the caller passes back unread. On its own::

    from rocketspark.client.admin_core import AdminConnection
    from rocketspark.client.browse import browse_messages

    with AdminConnection("127.0.0.1:9876") as connection:
        page = browse_messages(connection, "orders", limit=20)
        older = browse_messages(connection, "orders", limit=20, cursor=page.cursor)

Static topics are read as every reader reads them, logical queue by logical queue across
their segments (:mod:`rocketspark.client.logical`); the messages carry the topic's queue
numbering and logical offsets. Reading counts as messages out in the brokers' counters and
metrics, as any pull does, but it is no delivery: a traced topic's trace does not show it.
"""

from __future__ import annotations

import base64
import binascii
import heapq
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from rocketspark.client.admin_core import MessageCore, QueueCore
from rocketspark.client.logical import LogicalQueue, count, plan_ranges
from rocketspark.errors import InvalidParameterError
from rocketspark.protocol.trace import BROWSE
from rocketspark.protocol.types import MessageExt, PullStatus
from rocketspark.protocol.validation import validate_topic_name

if TYPE_CHECKING:
    from rocketspark.client.consumer import Consumer

MAX_LIMIT: Final = 200  # messages a page may ask for
DEFAULT_LIMIT: Final = 20
_CURSOR_VERSION: Final = 1


@dataclass(frozen=True, slots=True)
class MessagePage:
    """One page of a topic's messages."""

    messages: list[MessageExt]  # newest first (by store time), at most the limit asked for
    cursor: str | None  # opaque; pass it back for the next (older) page; None: no more


@dataclass(frozen=True, slots=True)
class Remaining:
    """What a cursor carries: the topic and time range it was made for, and per logical queue
    the range ``[low, top)`` of logical offsets still to show."""

    topic: str
    start_ms: int | None
    end_ms: int | None
    queues: dict[int, tuple[int, int]]


def back_from(queue: LogicalQueue, low: int, top: int, n: int) -> int:
    """The logical offset from which ``[offset, top)`` holds the last ``n`` messages of
    ``[low, top)`` (or all of them): a static topic's gaps between segments hold none."""
    for piece in reversed(plan_ranges(queue, low, top)):
        if n <= piece.count:
            return piece.logical_end - n
        n -= piece.count
    return low


class _Backwards:
    """One logical queue read from its top down, a chunk at a time; ``resume`` is where the
    next page goes on (below the newest message not yet shown)."""

    def __init__(
        self, consumer: Consumer, queue: LogicalQueue, low: int, top: int, chunk: int, where: Remaining
    ) -> None:
        self.consumer = consumer
        self.queue = queue
        self.low = low
        self.top = top  # logical, exclusive: everything from here up is in ``buffer`` or shown
        self.resume = top
        self.chunk = chunk
        self.where = where
        self.buffer: list[MessageExt] = []  # oldest first: the newest not yet shown is last

    def peek(self) -> MessageExt | None:
        while not self.buffer and self.top > self.low:
            start = back_from(self.queue, self.low, self.top, self.chunk)
            self.buffer = self._read(start, self.top)
            self.top = start
        return self.buffer[-1] if self.buffer else None

    def pop(self) -> MessageExt:
        message = self.buffer.pop()
        self.resume = message.queue_offset
        return message

    @property
    def done(self) -> bool:
        return not self.buffer and count(self.queue, self.low, self.top) == 0

    def _read(self, start: int, end: int) -> list[MessageExt]:
        """The messages of logical ``[start, end)`` in the time range, oldest first; a start
        retention deleted since is read from the oldest message still stored."""
        found: list[MessageExt] = []
        offset = start
        while offset < end:
            results = self.consumer.iter_range(self.queue.topic, self.queue.queue_id, offset, end, batch=self.chunk)
            illegal = None
            for result in results:
                if result.status is PullStatus.OFFSET_ILLEGAL:
                    illegal = result.next_offset
                found += [m for m in result.messages if start <= m.queue_offset < end and self._in_time(m)]
            if illegal is None or not offset < illegal < end:
                break
            offset = illegal
        return found

    def _in_time(self, message: MessageExt) -> bool:
        low, high = self.where.start_ms, self.where.end_ms
        return (low is None or message.store_timestamp >= low) and (high is None or message.store_timestamp < high)


def browse_messages(
    core: MessageCore,
    topic: str,
    *,
    start_ms: int | None = None,
    end_ms: int | None = None,
    limit: int = DEFAULT_LIMIT,
    cursor: str | None = None,
) -> MessagePage:
    """The messages of ``topic`` stored in ``[start_ms, end_ms)`` (None: unbounded), newest
    first, at most ``limit`` (1 to 200); the page's cursor gives the next, older, page. With a
    cursor, the time range is the cursor's (a range given too must be the same)."""
    validate_topic_name(topic)
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidParameterError(f"limit must be between 1 and {MAX_LIMIT} messages a page, got {limit}")
    if start_ms is not None and end_ms is not None and end_ms <= start_ms:
        raise InvalidParameterError(f"the time range is empty: end {end_ms} is not after start {start_ms} (ms)")
    core.topic_route(topic)  # TopicNotExistError names an unknown topic, as every admin look-up does
    queues = core.queues(topic)
    if cursor is None:
        where = Remaining(topic, start_ms, end_ms, _bounds(core, topic, queues, start_ms, end_ms))
    else:
        where = decode_cursor(cursor, topic, start_ms, end_ms, len(queues))
    from rocketspark.client.consumer import Consumer

    # its reads are no delivery: a traced topic's messages show none for them
    with core.sibling(Consumer, timeout_ms=core.timeout_ms, labels={"via": BROWSE}) as consumer:
        readers = [
            _Backwards(consumer, queues[q], low, top, limit, where)
            for q, (low, top) in sorted(where.queues.items())
            if low < top
        ]
        messages = _newest(readers, limit)
    left = {r.queue.queue_id: (r.low, r.resume) for r in readers if not r.done}
    return MessagePage(messages, encode_cursor(Remaining(topic, where.start_ms, where.end_ms, left)) if left else None)


def _bounds(
    core: QueueCore, topic: str, queues: list[LogicalQueue], start_ms: int | None, end_ms: int | None
) -> dict[int, tuple[int, int]]:
    """Per logical queue, the logical offsets ``[low, top)`` stored in the time range."""
    out = {}
    for queue in queues:
        q = queue.queue_id
        low = core.min_offset(topic, q) if start_ms is None else core.offset_for_timestamp(topic, q, start_ms)
        top = core.max_offset(topic, q) if end_ms is None else core.offset_for_timestamp(topic, q, end_ms)
        out[q] = (low, top)
    return out


def _newest(readers: list[_Backwards], limit: int) -> list[MessageExt]:
    """Up to ``limit`` messages, newest first, merged from the queues read backwards."""
    brokers = sorted({s.broker_name for r in readers for s in r.queue.segments})
    order = _Order({name: i for i, name in enumerate(brokers)})
    heap = [order.place(head, i) for i, r in enumerate(readers) if (head := r.peek()) is not None]
    heapq.heapify(heap)
    out: list[MessageExt] = []
    while heap and len(out) < limit:
        i = heapq.heappop(heap)[-1]
        reader = readers[i]
        out.append(reader.pop())
        head = reader.peek() if len(out) < limit else None
        if head is not None:
            heapq.heappush(heap, order.place(head, i))
    return out


@dataclass(frozen=True, slots=True)
class _Order:
    """Newest first: by store time, then (many messages share a millisecond) born time, then,
    on one broker, the order of its log; between brokers a tie has no true order, and the later
    broker name goes first."""

    ranks: dict[str, int]  # broker name -> its place among the topic's brokers

    def place(self, message: MessageExt, reader: int) -> tuple[int, int, int, int, int, int]:
        return (
            -message.store_timestamp,
            -message.born_timestamp,
            -self.ranks.get(message.broker_name, -1),
            -message.commitlog_offset,
            -message.batch_index,
            reader,
        )


def encode_cursor(where: Remaining) -> str:
    document = {
        "v": _CURSOR_VERSION,
        "t": where.topic,
        "s": where.start_ms,
        "e": where.end_ms,
        "q": [[q, low, top] for q, (low, top) in sorted(where.queues.items())],
    }
    raw = json.dumps(document, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str, topic: str, start_ms: int | None, end_ms: int | None, queue_count: int) -> Remaining:
    """A cursor read back; InvalidParameterError for one that is malformed or was made for
    another topic, time range or queue layout."""
    try:
        raw = base64.urlsafe_b64decode(cursor.strip() + "=" * (-len(cursor.strip()) % 4))
        document = json.loads(raw)
        if document["v"] != _CURSOR_VERSION:
            raise ValueError("version")
        where = Remaining(
            str(document["t"]),
            _optional_int(document["s"]),
            _optional_int(document["e"]),
            {int(q): (int(low), int(top)) for q, low, top in document["q"]},
        )
    except (binascii.Error, ValueError, KeyError, TypeError, UnicodeDecodeError):
        raise InvalidParameterError(_start_again("is malformed: not one a page of messages returned")) from None
    if where.topic != topic:
        raise InvalidParameterError(_start_again(f'was made for topic "{where.topic}", not "{topic}"'))
    for given, kept, name in ((start_ms, where.start_ms, "start"), (end_ms, where.end_ms, "end")):
        if given is not None and given != kept:
            raise InvalidParameterError(_start_again(f"was made for {name} {kept}, not {given} (ms)"))
    if any(not 0 <= q < queue_count for q in where.queues):
        raise InvalidParameterError(_start_again(f"names queues the topic no longer has ({queue_count} now)"))
    return where


def _optional_int(value: object) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError("not an int")
    return value


def _start_again(why: str) -> str:
    return f"the cursor {why}; start again without a cursor (the first page)"
