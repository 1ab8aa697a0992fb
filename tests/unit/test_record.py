"""The record payload's header, read without a parser, and the tag hash stored queues hold."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from broker.store.recovery import tag_hash as stored_tag_hash
from broker.store.store import MessageStore, StoreConfig
from rocketspark.protocol.codec import check_payload
from rocketspark.protocol.record import encode_payload, payload_tag, tag_hash


def test_the_payload_tag_is_read_from_its_header() -> None:
    tagged = b"xx" + encode_payload(b"body" * 100, "TagA", ["k"], {"p": "v"}) + b"yy"
    assert payload_tag(tagged, 2, len(tagged) - 2) == (b"TagA", 400)
    untagged = encode_payload(b"b", None, [], {})
    assert payload_tag(untagged, 0, len(untagged)) == (None, 1)


def test_a_payload_whose_lengths_do_not_add_up_is_refused() -> None:
    payload = encode_payload(b"body", "t", [], {})
    with pytest.raises(ValueError, match="shorter than its 10-byte header"):
        payload_tag(payload, 0, 3)
    with pytest.raises(ValueError, match="do not add up"):
        payload_tag(payload, 0, len(payload) - 1)


@pytest.mark.parametrize("tag", [None, "", "A", "TagA", "ünïcødé", "x" * 300])
def test_tag_hashes_match_what_stored_consume_queues_hold(tag: str | None) -> None:
    payload = encode_payload(b"b", tag, [], {})
    raw, _ = payload_tag(payload, 0, len(payload))
    assert tag_hash(raw) == stored_tag_hash(tag) == check_payload(payload)[0]


def test_a_rebuilt_consume_queue_has_the_same_entries(tmp_path: Path) -> None:
    config = StoreConfig(path=tmp_path / "store", segment_bytes=1024, queue_entries_per_file=8)
    store = MessageStore(config)
    store.open()
    tags = [None, "A", "B", "ünï", ""]
    for i in range(40):
        tag = tags[i % len(tags)]
        payload = encode_payload(f"m{i}".encode(), tag, ["k"] if i % 2 else [], {})
        store.put("t", 0, int(time.time() * 1000), [payload], [stored_tag_hash(tag)])
    store.close()
    queue_dir = tmp_path / "store" / "consumequeue" / "t" / "0"
    before = {p.name: p.read_bytes() for p in queue_dir.iterdir()}
    shutil.rmtree(queue_dir)

    store = MessageStore(config)
    store.open()
    assert store.max_offset("t", 0) == 40  # first use: the checkpoint knew it, so it is rebuilt
    assert store.stats.queues_rebuilt == 1
    store.close()
    assert {p.name: p.read_bytes() for p in queue_dir.iterdir()} == before
