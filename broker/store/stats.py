"""The store's counters, shared by the store and its readers (reported by GET_COUNTERS and
the metrics). Per topic, what went in and out: one dictionary update per batch stored or
range read, dropped with the topic, so the metrics' series stay as many as the topics."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(slots=True)
class Traffic:
    messages_in: int = 0
    bytes_in: int = 0
    messages_out: int = 0
    bytes_out: int = 0
    # of messages_in and bytes_in, those of a type other than normal (fifo, delay, transaction)
    typed: dict[str, list[int]] = field(default_factory=dict)

    def by_type(self) -> list[tuple[str, int, int]]:
        """``(message type, messages in, bytes in)``: normal, then the others seen."""
        normal = [self.messages_in, self.bytes_in]
        rows = []
        for kind, (count, size) in self.typed.items():
            normal[0] -= count
            normal[1] -= size
            rows.append((kind, count, size))
        return [("normal", normal[0], normal[1]), *rows]


def _no_flush_observer(seconds: float) -> None:
    pass


@dataclass
class StoreStats:
    messages_put: int = 0
    bytes_put: int = 0
    messages_got: int = 0
    segments_deleted_for_age: int = 0  # retention_hours
    segments_deleted_for_space: int = 0  # deleted before their time because the disk was filling up
    index_mismatches: int = 0  # reads refused because an entry disagreed with its record
    queues_rebuilt: int = 0
    messages_copied: int = 0  # records a slave copied from its master
    topics: dict[str, Traffic] = field(default_factory=dict)
    on_flush: Callable[[float], None] = _no_flush_observer  # each log flush's seconds (the metrics' histogram)

    @property
    def segments_deleted(self) -> int:
        return self.segments_deleted_for_age + self.segments_deleted_for_space

    def _of(self, topic: str) -> Traffic:
        traffic = self.topics.get(topic)
        if traffic is None:
            traffic = self.topics[topic] = Traffic()
        return traffic

    def stored(self, topic: str, count: int, size: int) -> None:
        self.messages_put += count
        self.bytes_put += size
        traffic = self._of(topic)
        traffic.messages_in += count
        traffic.bytes_in += size

    def typed(self, topic: str, kinds: tuple[tuple[str, int], ...], count: int, size: int) -> None:
        """Of a batch just ``stored`` (``count`` messages, ``size`` bytes), the messages of a
        type other than normal; a mixed batch's bytes are shared by count."""
        typed = self._of(topic).typed
        for kind, n in kinds:
            n = min(n, count)
            tally = typed.get(kind)
            if tally is None:
                tally = typed[kind] = [0, 0]
            tally[0] += n
            tally[1] += size * n // count

    def read(self, topic: str, count: int, size: int) -> None:
        self.messages_got += count
        traffic = self._of(topic)
        traffic.messages_out += count
        traffic.bytes_out += size

    def forget(self, topic: str) -> None:
        self.topics.pop(topic, None)
