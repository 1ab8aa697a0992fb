"""Finding a stored message by either of its ids, on a real store with tiny segments: the record
holding an offset id's position (``store.locate``), and the key index's batch ranges and own
``UNIQ_KEY``s (``keyindex``, ``keydb``)."""

from __future__ import annotations

import sqlite3
import struct
import zlib
from pathlib import Path

from broker.store.keyindex import KeyIndex
from broker.store.store import MessageStore
from rocketspark.codec import ids
from rocketspark.codec.build import encode_messages, tag_summary_of
from rocketspark.codec.layout import BODY_AT, BODY_CRC_AT, HEADER_SIZE, V2_HEADER_SIZE
from rocketspark.protocol.types import Message
from tests.helpers import decode_messages
from tests.unit.test_store import open_store


def put_messages(store: MessageStore, queue_id: int, messages: list[Message], **encode: object) -> int:
    """Store one batch record of ``messages`` (of topic "orders"); its log offset."""
    record = encode_messages("orders", messages, **encode)  # type: ignore[arg-type]
    return store.put("orders", queue_id, record, len(messages), tag_summary_of(record)).first_offset


def plain(n: int, tag: str = "x") -> list[Message]:
    return [Message("orders", f"{tag}{i}".encode()) for i in range(n)]


def test_every_message_of_a_batch_is_found_at_its_physical_offset(tmp_path: Path) -> None:
    store = open_store(tmp_path / "s")  # segments of 1 KiB: a few records each
    starts = [put_messages(store, q % 2, plain(7, f"b{q}-")) for q in range(12)]  # segments roll
    assert len(store.commitlog.segments) > 2
    for q, start in enumerate(starts):
        for i in range(7):
            found = store.record_holding(ids.physical_offset(start, i))
            assert found is not None and (found.phys, found.place) == (start, i)
            assert decode_messages(found.record)[i].body == f"b{q}-{i}".encode()
        assert store.record_holding(start + 7) is None  # inside the record's bytes, past its messages
    assert store.record_holding(store.commitlog.max_offset + 3) is None
    assert store.record_holding(-1) is None
    store.close()


def test_a_record_image_inside_a_message_body_is_not_taken_for_a_record(tmp_path: Path) -> None:
    store = open_store(tmp_path / "s", segment_bytes=1 << 16)
    image = encode_messages("orders", plain(1, "forged"))  # a whole record, CRCs and all, sent as a body
    start = put_messages(store, 0, [Message("orders", image)])
    prefix = store.read_record(start, 4)
    assert prefix is not None
    stored = store.read_record(start, int.from_bytes(prefix, "big"))
    assert stored is not None
    inside = start + stored.index(image)  # where the image lies: inside the real record, past its message
    assert store.record_holding(inside) is None  # the image names no queue entry; the real record no message there
    assert store.record_holding(start) is not None
    store.close()


def index_all(index: KeyIndex) -> None:
    while index.index_round():
        pass
    index.index_round()


def test_the_key_index_finds_client_ids_by_batch_range_and_own_uniq_keys(tmp_path: Path) -> None:
    store = open_store(tmp_path / "s", segment_bytes=4096, flush_interval_ms=10)
    first = ids.IdMinter(bytes([10, 9, 9, 9])).next(50)  # a minter of its own: no other range follows it
    big = put_messages(store, 0, plain(50), first_id=first)
    own = [Message("orders", b"v2", properties={"UNIQ_KEY": "01AABBCCDDEEFF0011223344556677"}), *plain(2)]
    mixed = put_messages(store, 1, own)
    store.flusher.flush_all()
    index = KeyIndex(tmp_path / "keys.db", store)
    index.db.open()
    index_all(index)
    for i in (0, 17, 49):
        text = ids.client_id_at(first, i)
        assert [(h.phys, h.index) for h in index.lookup_id(ids.parse_client_id(text), text, 10)] == [(big, i)]
    past = bytes.fromhex(ids.client_id_at(first, 50))
    assert index.lookup_id(past, ids.client_id_at(first, 50), 10) == []  # just past the range: not there
    assert [(h.phys, h.index) for h in index.lookup_id(None, "01AABBCCDDEEFF0011223344556677", 10)] == [(mixed, 0)]
    assert [(h.phys, h.index) for h in index.lookup_id(None, "01aabbccddeeff0011223344556677", 10)] == [(mixed, 0)]
    rows = sqlite3.connect(tmp_path / "keys.db").execute("SELECT count(*) FROM batches").fetchone()[0]
    assert rows == 2  # one row per batch, not per message
    index.db.cut(mixed)  # a replica's log cut back: the rows past it go
    assert index.lookup_id(None, "01AABBCCDDEEFF0011223344556677", 10) == []
    index.db.drop_before(mixed)  # retention took the first batch
    assert index.lookup_id(first, ids.client_id_at(first, 0), 10) == []
    index.db.close()
    store.close()


def test_an_index_made_before_client_ids_is_made_again_from_the_log(tmp_path: Path) -> None:
    store = open_store(tmp_path / "s", segment_bytes=4096, flush_interval_ms=10)
    first = ids.mint(3)
    at = put_messages(store, 0, [Message("orders", b"k", keys=["k1"]), *plain(2)], first_id=first)
    store.flusher.flush_all()
    old = sqlite3.connect(tmp_path / "keys.db")  # what an older broker left: keys only, all indexed
    old.executescript(
        "CREATE TABLE keys (topic TEXT NOT NULL, key TEXT NOT NULL, phys INTEGER NOT NULL, idx INTEGER NOT NULL);"
        "CREATE TABLE progress (id INTEGER PRIMARY KEY CHECK (id = 0), indexed_to INTEGER NOT NULL);"
        f"INSERT INTO keys VALUES ('orders', 'k1', {at}, 0);"
        f"INSERT INTO progress VALUES (0, {store.commitlog.max_offset});"
    )
    old.close()
    index = KeyIndex(tmp_path / "keys.db", store)
    assert index.db.open() == 0  # indexed again from the start
    index_all(index)
    assert [(h.phys, h.index) for h in index.lookup("orders", "k1", 10)] == [(at, 0)]  # once, not twice
    text = ids.client_id_at(first, 2)
    assert [(h.phys, h.index) for h in index.lookup_id(ids.parse_client_id(text), text, 10)] == [(at, 2)]
    index.db.close()
    store.close()


def version_2(record: bytes) -> bytes:
    """A sent record as rocketspark wrote it before client ids (layout version 2)."""
    out = bytearray(record[:V2_HEADER_SIZE] + record[HEADER_SIZE:])
    out[BODY_AT] = 2
    struct.pack_into(">I", out, 0, len(out))
    struct.pack_into(">I", out, BODY_CRC_AT, zlib.crc32(out[BODY_AT:]))
    return bytes(out)


def test_records_of_the_previous_version_are_found_by_position_and_their_keys_indexed(tmp_path: Path) -> None:
    store = open_store(tmp_path / "s", segment_bytes=4096, flush_interval_ms=10)
    record = version_2(encode_messages("orders", [Message("orders", b"a", keys=["old"]), *plain(2)]))
    at = store.put("orders", 0, record, 3, tag_summary_of(record)).first_offset
    found = store.record_holding(at + 2)
    assert found is not None and decode_messages(found.record)[2].body == b"x1"
    assert decode_messages(found.record)[2].client_id is None
    store.flusher.flush_all()
    index = KeyIndex(tmp_path / "keys.db", store)
    index.db.open()
    index_all(index)
    assert [(h.phys, h.index) for h in index.lookup("orders", "old", 10)] == [(at, 0)]
    assert sqlite3.connect(tmp_path / "keys.db").execute("SELECT count(*) FROM batches").fetchone()[0] == 0
    index.db.close()
    store.close()


def test_one_message_records_over_many_read_ahead_windows_are_all_indexed(tmp_path: Path) -> None:
    """A service sending one message at a time: thousands of small records, read in windows
    (a record straddling a window's end is read the long way), and a few large ones; keyed,
    compressed and plain ones mixed, each found by its key or id."""
    from rocketspark.codec.layout import ZSTD

    store = open_store(tmp_path / "s", segment_bytes=1 << 20, flush_interval_ms=10)
    body = bytes(range(256)) * 4  # 1 KiB: a few hundred records a window, segments roll too
    large = body * 40  # now and then a large record, whose body the index does not read back
    placed: list[tuple[int, bytes, str | None]] = []
    for i in range(3000):
        first = ids.mint(1)
        keys = [f"k{i}"] if i % 7 == 0 else []
        kind = ZSTD if i % 11 == 0 else 0
        sent = [Message("orders", large if i % 400 in (13, 14) else body, keys=keys)]
        at = put_messages(store, i % 4, sent, first_id=first, compression_kind=kind)
        placed.append((at, first, keys[0] if keys else None))
    assert len(store.commitlog.segments) > 2
    store.flusher.flush_all()
    index = KeyIndex(tmp_path / "keys.db", store)
    index.db.open()
    index_all(index)
    assert index.indexed_to == store.indexable_end
    for at, first, key in placed:
        text = ids.client_id_at(first, 0)
        assert [(h.phys, h.index) for h in index.lookup_id(ids.parse_client_id(text), text, 10)] == [(at, 0)]
        if key is not None:
            assert [(h.phys, h.index) for h in index.lookup("orders", key, 10)] == [(at, 0)]
    assert index.keys_indexed == len([p for p in placed if p[2] is not None])
    index.db.close()
    store.close()


def test_rows_go_in_statements_an_older_sqlite_takes() -> None:
    """SQLite before 3.32 takes 999 variables a statement: the index's multi-row INSERTs stay
    under what the SQLite at hand allows, whatever it is."""
    from broker.store.keydb import insert_rows

    db = sqlite3.connect(":memory:")
    db.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 999)
    db.execute("CREATE TABLE keys (topic TEXT, key TEXT, phys INTEGER, idx INTEGER)")
    rows = [("orders", f"k{i}", i, 0) for i in range(3000)]
    insert_rows(db, "INSERT INTO keys VALUES (?, ?, ?, ?)", rows)
    assert db.execute("SELECT count(*), sum(phys) FROM keys").fetchone() == (3000, sum(range(3000)))
    insert_rows(db, "INSERT INTO keys VALUES (?, ?, ?, ?)", [])  # nothing to add: no statement
    db.close()
