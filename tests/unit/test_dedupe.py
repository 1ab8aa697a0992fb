"""The idempotent-producer table: what is saved never runs ahead of the flushed log, what the
log holds after the save is replayed, and an epoch never goes backwards."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from broker.dedupe import ProducerTable
from broker.store.scan import ScannedRecord
from rocketspark.errors import ProducerFencedError

KEY = (0x1234, "orders", 0)


def reload(path: Path) -> ProducerTable:
    table = ProducerTable(path, retention_hours=24)
    table.load()
    return table


def next_seqs(table: ProducerTable) -> dict[tuple[int, str, int], int]:
    return {key: state.next_seq for key, state in table.states.items()}


def batch(key: tuple[int, str, int], epoch: int, seq: int, count: int, phys: int, size: int = 100) -> ScannedRecord:
    pid, topic, queue_id = key
    return ScannedRecord(phys, size, topic, queue_id, seq, count, 0, 0, pid, epoch, seq)


def test_a_sequence_is_saved_only_once_the_log_has_flushed_its_records(tmp_path: Path) -> None:
    path = tmp_path / "producers.json"
    table = ProducerTable(path, retention_hours=24)
    table.stored(KEY, 0, 0, 5, end_offset=1000)
    assert table.already_stored(KEY, 0, 0, 5) == 5  # resends are dropped while the broker runs

    table.persist(flushed_offset=999)  # the batch is not on disk yet: an OS crash may cut it
    assert reload(path).already_stored(KEY, 0, 0, 5) == 0  # so the file alone does not drop it

    table.persist(flushed_offset=1000)
    assert reload(path).already_stored(KEY, 0, 0, 5) == 5


def test_the_file_says_up_to_where_it_is_current_and_the_rest_is_replayed_from_the_log(tmp_path: Path) -> None:
    path = tmp_path / "producers.json"
    table = ProducerTable(path, retention_hours=24)
    table.stored(KEY, 0, 0, 3, end_offset=300)
    table.stored(KEY, 0, 3, 4, end_offset=700)
    asyncio.run(table.save(flushed_offset=500))
    saved = reload(path)
    assert next_seqs(saved) == {KEY: 3} and saved.saved_upto == 500
    # A SIGKILL right after the second batch was acknowledged: the log still holds it.
    saved.replay_log([batch(KEY, 0, 3, 4, phys=600)])
    assert saved.already_stored(KEY, 0, 3, 4) == 4


def test_replaying_batches_already_in_the_table_changes_nothing(tmp_path: Path) -> None:
    table = ProducerTable(tmp_path / "producers.json", retention_hours=24)
    table.stored(KEY, 0, 0, 10, end_offset=1000)
    table.replay_log([batch(KEY, 0, 0, 4, phys=100), batch((7, "other", 1), 0, 0, 2, phys=200)])
    assert next_seqs(table) == {KEY: 10, (7, "other", 1): 2}


def test_a_saved_sequence_beyond_the_recovered_log_is_forgotten(tmp_path: Path) -> None:
    path = tmp_path / "producers.json"
    table = ProducerTable(path, retention_hours=24)
    other = (0x99, "orders", 1)
    table.stored(KEY, 0, 0, 5, end_offset=1000)
    table.stored(other, 0, 0, 2, end_offset=1200)
    table.persist(flushed_offset=1200)

    recovered = reload(path)
    assert recovered.forget_beyond(1100) == [other]  # recovery cut the log at 1100
    assert recovered.already_stored(other, 0, 0, 2) == 0
    assert recovered.already_stored(KEY, 0, 0, 5) == 5
    recovered.persist(flushed_offset=1100)
    assert next_seqs(reload(path)) == {KEY: 5}


def test_an_older_epoch_is_fenced_and_a_newer_one_numbers_afresh(tmp_path: Path) -> None:
    table = ProducerTable(tmp_path / "producers.json", retention_hours=24)
    table.stored(KEY, 3, 0, 10, end_offset=100)
    with pytest.raises(ProducerFencedError, match=r"epoch 2 .* epoch 3 of it has written there since"):
        table.already_stored(KEY, 2, 10, 1)
    assert table.already_stored(KEY, 4, 0, 5) == 0  # a new incarnation starts at 0
    table.stored(KEY, 4, 0, 5, end_offset=200)
    assert table.already_stored(KEY, 4, 0, 5) == 5
    with pytest.raises(ProducerFencedError):
        table.already_stored(KEY, 3, 10, 1)


def test_a_resend_overlapping_what_was_stored_drops_only_the_stored_front(tmp_path: Path) -> None:
    table = ProducerTable(tmp_path / "producers.json", retention_hours=24)
    table.stored(KEY, 0, 0, 6, end_offset=100)
    assert table.already_stored(KEY, 0, 4, 5) == 2


def test_a_slave_keeps_its_masters_watermark_until_it_takes_office(tmp_path: Path) -> None:
    table = ProducerTable(tmp_path / "producers.json", retention_hours=24)
    table.follow([[KEY[0], KEY[1], KEY[2], 0, 7, 1.0e9, 700]], upto=800)
    table.persist(flushed_offset=5000)  # its own flushed log says nothing of the master's table
    assert table.saved_upto == 800 and table.following
    table.replay_log([batch(KEY, 0, 7, 3, phys=800)])  # copied after the snapshot
    assert not table.following and table.already_stored(KEY, 0, 7, 3) == 3


def test_the_rows_of_a_remapped_queue_are_relabelled_for_its_new_broker(tmp_path: Path) -> None:
    table = ProducerTable(tmp_path / "producers.json", retention_hours=24)
    table.stored(KEY, 1, 0, 4, end_offset=100)
    table.stored((5, "orders", 1), 0, 0, 1, end_offset=200)
    rows = table.rows_for("orders", 0, as_queue=3)
    assert [(r[0], r[1], r[2], r[3], r[4]) for r in rows] == [(KEY[0], "orders", 3, 1, 4)]
    new = ProducerTable(tmp_path / "new.json", retention_hours=24)
    new.adopt(rows)
    assert new.already_stored((KEY[0], "orders", 3), 1, 0, 4) == 4


def test_a_failed_save_is_retried(tmp_path: Path) -> None:
    blocker = tmp_path / "config"
    blocker.write_text("a file where the directory should be")
    path = blocker / "producers.json"
    table = ProducerTable(path, retention_hours=24)
    table.stored(KEY, 0, 0, 1, end_offset=10)
    with pytest.raises(OSError):
        table.persist(flushed_offset=10)
    assert table.file.dirty
    blocker.unlink()
    table.persist(flushed_offset=10)
    assert not table.file.dirty
    assert next_seqs(reload(path)) == {KEY: 1}


def test_a_replayed_row_saved_after_the_masters_rows_were_adopted_does_not_lower_them(tmp_path: Path) -> None:
    path = tmp_path / "producers.json"
    table = ProducerTable(path, retention_hours=24)
    table.replay_log([batch(KEY, 0, 0, 10, phys=100)])  # a restarted slave's own log, queued for saving
    table.follow([[KEY[0], KEY[1], KEY[2], 0, 20, time.time(), 300]], upto=300)  # then its master's table
    table.persist(flushed_offset=1000)
    assert next_seqs(reload(path)) == {KEY: 20}
