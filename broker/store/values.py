"""What the store takes and gives back as plain values: its settings (``StoreConfig``) and
where a put landed (``PutResult``). Compiled with the store (``setup.py``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Final


@dataclass(frozen=True, slots=True, kw_only=True)
class StoreConfig:
    """The store's settings, built by ``broker.config.BrokerConfig.store_config``, where each
    is declared (with its default and its meaning) under the key a user writes."""

    path: Path  # data_dir
    segment_bytes: int
    queue_entries_per_file: int
    flush_mode: str
    flush_interval_ms: int
    sync_flush_timeout_ms: int
    retention_ms: int  # retention_hours
    checkpoint_interval_ms: int
    scrub_bytes_per_s: int  # 0: no scrub
    scrub_pause_ms: int
    max_record_bytes: int  # a larger size field in a record header is damage (from the batch limit)


@dataclass(init=False)
class PutResult:
    """Where a put landed. ``__init__`` is written out: compiled, it is a native constructor (a
    generated frozen one runs as Python, once a send); the ``Final`` fields are never reassigned."""

    first_queue_offset: Final[int]
    first_offset: Final[int]  # commit-log offset of the first record
    end_offset: Final[int]  # commit-log offset just past the last record
    count: Final[int]
    store_ms: Final[int]

    def __init__(self, first_queue_offset: int, first_offset: int, end_offset: int, count: int, store_ms: int) -> None:
        self.first_queue_offset, self.first_offset, self.end_offset = first_queue_offset, first_offset, end_offset
        self.count, self.store_ms = count, store_ms
