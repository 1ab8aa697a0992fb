"""The store's counters, shared by the store and its readers (reported by GET_COUNTERS)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class StoreStats:
    messages_put: int = 0
    bytes_put: int = 0
    messages_got: int = 0
    segments_deleted: int = 0
    index_mismatches: int = 0  # reads refused because an entry disagreed with its record
    queues_rebuilt: int = 0
    messages_copied: int = 0  # records a slave copied from its master
