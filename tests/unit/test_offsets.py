"""Consumer offsets: saved off the event loop, a failed save retried."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from broker.offsets import ConsumerOffsets


def reload(path: Path) -> ConsumerOffsets:
    offsets = ConsumerOffsets(path)
    offsets.load()
    return offsets


def test_the_periodic_save_writes_committed_offsets(tmp_path: Path) -> None:
    path = tmp_path / "consumerOffset.json"
    offsets = ConsumerOffsets(path)
    offsets.commit("g", "orders", 1, 42)
    asyncio.run(offsets.save())
    assert not offsets.file.dirty
    assert reload(path).query("g", "orders", 1) == 42


def test_a_failed_save_is_retried(tmp_path: Path) -> None:
    blocker = tmp_path / "config"
    blocker.write_text("a file where the directory should be")
    path = blocker / "consumerOffset.json"
    offsets = ConsumerOffsets(path)
    offsets.commit("g", "orders", 0, 7)
    with pytest.raises(OSError):
        asyncio.run(offsets.save())
    assert offsets.file.dirty  # still to be written
    blocker.unlink()
    asyncio.run(offsets.save())
    assert reload(path).query("g", "orders", 0) == 7


def test_a_commit_made_while_a_save_is_writing_is_saved_next_time(tmp_path: Path) -> None:
    path = tmp_path / "consumerOffset.json"
    offsets = ConsumerOffsets(path)
    offsets.commit("g", "orders", 0, 1)
    snapshot, version = offsets.snapshot(), offsets.file.version
    offsets.commit("g", "orders", 0, 2)  # lands after the snapshot was taken
    offsets.file.write(snapshot, version)
    assert offsets.file.dirty
    offsets.persist()
    assert reload(path).query("g", "orders", 0) == 2


def test_dropping_a_topic_drops_the_offsets_of_groups_with_an_at_sign(tmp_path: Path) -> None:
    offsets = ConsumerOffsets(tmp_path / "consumerOffset.json")
    offsets.commit("team@site", "orders", 0, 5)
    offsets.commit("plain", "orders", 1, 6)
    offsets.commit("team@site", "orders-2", 0, 7)
    offsets.drop_topic("orders")
    assert offsets.query("team@site", "orders", 0) is None
    assert offsets.query("plain", "orders", 1) is None
    assert offsets.query("team@site", "orders-2", 0) == 7
