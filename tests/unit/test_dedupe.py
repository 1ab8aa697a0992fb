"""The idempotent-producer table: what is saved must never run ahead of the flushed log."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from broker.dedupe import ProducerTable

KEY = ("producer-1", "orders", 0)


def reload(path: Path) -> ProducerTable:
    table = ProducerTable(path, retention_hours=24)
    table.load()
    return table


def test_a_sequence_is_saved_only_once_the_log_has_flushed_its_records(tmp_path: Path) -> None:
    path = tmp_path / "producers.json"
    table = ProducerTable(path, retention_hours=24)
    table.stored(KEY, 0, 5, end_offset=1000)
    assert table.already_stored(KEY, 0, 5) == 5  # resends are dropped while the broker runs

    table.persist(flushed_offset=999)  # the batch is not on disk yet: an OS crash may cut it
    assert reload(path).already_stored(KEY, 0, 5) == 0  # so its resend must be stored again

    table.persist(flushed_offset=1000)
    assert reload(path).already_stored(KEY, 0, 5) == 5


def test_the_periodic_save_writes_only_flushed_sequences(tmp_path: Path) -> None:
    path = tmp_path / "producers.json"
    table = ProducerTable(path, retention_hours=24)
    table.stored(KEY, 0, 3, end_offset=300)
    table.stored(KEY, 3, 4, end_offset=700)
    asyncio.run(table.save(flushed_offset=500))
    assert reload(path).next_seq == {KEY: 3}
    asyncio.run(table.save(flushed_offset=700))
    assert reload(path).next_seq == {KEY: 7}


def test_a_saved_sequence_beyond_the_recovered_log_is_forgotten(tmp_path: Path) -> None:
    path = tmp_path / "producers.json"
    table = ProducerTable(path, retention_hours=24)
    other = ("producer-2", "orders", 1)
    table.stored(KEY, 0, 5, end_offset=1000)
    table.stored(other, 0, 2, end_offset=1200)
    table.persist(flushed_offset=1200)

    recovered = reload(path)
    assert recovered.forget_beyond(1100) == [other]  # recovery cut the log at 1100
    assert recovered.already_stored(other, 0, 2) == 0
    assert recovered.already_stored(KEY, 0, 5) == 5
    recovered.persist(flushed_offset=1100)
    assert reload(path).next_seq == {KEY: 5}


def test_a_failed_save_is_retried(tmp_path: Path) -> None:
    blocker = tmp_path / "config"
    blocker.write_text("a file where the directory should be")
    path = blocker / "producers.json"
    table = ProducerTable(path, retention_hours=24)
    table.stored(KEY, 0, 1, end_offset=10)
    with pytest.raises(OSError):
        table.persist(flushed_offset=10)
    assert table.file.dirty
    blocker.unlink()
    table.persist(flushed_offset=10)
    assert not table.file.dirty
    assert reload(path).next_seq == {KEY: 1}
