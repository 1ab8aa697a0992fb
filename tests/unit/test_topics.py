"""The broker's topic table and the TBW102 auto-create rule (seeds 002 and 004)."""

from __future__ import annotations

from pathlib import Path

from broker.topics import TopicTable
from rocketspark.protocol.types import Perm, TopicConfig
from rocketspark.protocol.validation import AUTO_CREATE_TOPIC


def test_auto_create_takes_the_smaller_of_the_template_and_the_client_queue_count(tmp_path: Path) -> None:
    table = TopicTable(tmp_path / "topics.json", "broker-a")
    table.set_auto_create(True, 8, 0)
    assert table.auto_create("small", AUTO_CREATE_TOPIC, 4, 0) == TopicConfig("small", 4, 4, Perm.READ_WRITE)
    assert table.auto_create("capped", AUTO_CREATE_TOPIC, 16, 0) == TopicConfig("capped", 8, 8, Perm.READ_WRITE)


def test_auto_create_is_refused_without_the_template(tmp_path: Path) -> None:
    table = TopicTable(tmp_path / "topics.json", "broker-a")
    table.set_auto_create(False, 8, 0)
    assert table.auto_create("x", AUTO_CREATE_TOPIC, 4, 0) is None
    table.put(TopicConfig("plain", 4, 4, Perm.READ_WRITE), 0)
    assert table.auto_create("y", "plain", 4, 0) is None  # a template needs the INHERIT bit


def test_topics_survive_a_reload_with_their_start_offset(tmp_path: Path) -> None:
    table = TopicTable(tmp_path / "topics.json", "broker-a")
    table.put(TopicConfig("orders", 2, 2, Perm.READ_WRITE), 4096)
    again = TopicTable(tmp_path / "topics.json", "broker-a")
    again.load()
    assert again.get("orders") == TopicConfig("orders", 2, 2, Perm.READ_WRITE)
    assert again.accepts("orders", 4096) and not again.accepts("orders", 4095)


def test_a_topic_change_is_one_journal_line_and_survives_a_reload_and_a_torn_line(tmp_path: Path) -> None:
    table = TopicTable(tmp_path / "topics.json", "broker-a")
    table.load()
    table.put(TopicConfig("first", 4, 4, Perm.READ_WRITE), 0)  # no snapshot yet: written whole
    snapshot = (tmp_path / "topics.json").read_bytes()
    for i in range(50):
        table.put(TopicConfig(f"t{i}", 2, 2, Perm.READ_WRITE), 0)
    table.delete("t3")
    assert (tmp_path / "topics.json").read_bytes() == snapshot  # not rewritten per topic
    assert table.journal.lines == 51
    table.close()
    with open(tmp_path / "topics.json.log", "ab") as log:
        log.write(b'{"version": 99, "put": {"na')  # a crash in the middle of an append

    again = TopicTable(tmp_path / "topics.json", "broker-a")
    again.load()
    assert set(again.topics) == {"first"} | {f"t{i}" for i in range(50)} - {"t3"}
    assert again.version == table.version


def test_the_journal_is_folded_into_the_snapshot_once_it_is_as_long_as_the_table(tmp_path: Path) -> None:
    table = TopicTable(tmp_path / "topics.json", "broker-a")
    table.COMPACT_MIN_LINES = 10
    table.load()
    for i in range(25):
        table.put(TopicConfig(f"t{i}", 1, 1, Perm.READ_WRITE), 0)
    assert table.journal.lines < 25
    again = TopicTable(tmp_path / "topics.json", "broker-a")
    again.load()
    assert len(again.topics) == 25
