"""Which record holds a physical offset (``rocketspark.codec.ids``): a message's offset id names
its batch's log offset plus its place, a point inside the batch's own bytes, and the batch whose
bytes cover it is found by binary search over a consume queue, whose entries go up the log.

A RocketMQ client sends the physical offset back alone (VIEW_MESSAGE_BY_ID, CONSUMER_SEND_MSG_BACK,
END_TRANSACTION): the queues to search are the ones it names (its topic), else every queue of
the broker, each searched in O(log n).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from broker.store.store import MessageStore


class Located(NamedTuple):
    topic: str
    queue_id: int
    record_offset: int  # the record's log offset
    place: int  # the message's index in it


def locate(store: MessageStore, physical: int, topics: Iterable[str] | None = None) -> Located | None:
    """The record of the queues of ``topics`` (default: every queue here) whose bytes hold ``physical``."""
    if physical < 0:
        return None
    known = store.known_queues()
    wanted = set(topics) if topics is not None else None
    for topic, queue_id in known:
        if wanted is not None and topic not in wanted:
            continue
        cq = store.queue(topic, queue_id)  # known: loaded, never created
        slot = cq.first_slot_at_or_after(physical + 1) - 1
        if slot < cq.min_slot:
            continue
        entry = cq.entry(slot)
        if entry.size and entry.phys <= physical < entry.phys + entry.size and physical - entry.phys < entry.messages:
            return Located(topic, queue_id, entry.phys, physical - entry.phys)
    return None
