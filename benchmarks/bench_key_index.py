"""``admin query-msg --key`` among a million messages: how long a look-up by key takes end to
end (Admin.query_messages: a request to the broker, its key index, the record read back and
checked), against a ceiling measured in the same run: the same look-up made directly on the
index's SQLite file, the layer underneath, with no request, read or check. Also the index's
catch-up rate behind the producers, its size on disk, and that it still answers after a SIGKILL
and restart of the broker (it is durable). Target: under 50 ms a look-up. And ``query-msg
--id`` (Admin.query_message_by_id) by client id (the index's batch ranges) and by offset id
(the broker finds the record in its log, no index), for messages the sends returned.
Usage: ``python benchmarks/bench_key_index.py [--messages N]``.
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rocketspark import Admin, LocalCluster, Message, Producer, compiled

TOPIC = "bench-keys"
BATCH = 1000


def wait_for(admin: Admin, key: str, timeout_s: float = 600) -> float:
    started = time.monotonic()
    while not admin.query_messages(TOPIC, key):
        if time.monotonic() - started > timeout_s:
            raise RuntimeError(f"key {key} not indexed within {timeout_s} s")
        time.sleep(0.1)
    return time.monotonic() - started


def lookups(admin: Admin, keys: list[str]) -> list[float]:
    out = []
    for key in keys:
        started = time.perf_counter()
        [found] = admin.query_messages(TOPIC, key)
        out.append((time.perf_counter() - started) * 1000)
        assert found.keys == [key]
    return out


def id_lookups(admin: Admin, ids: list[str]) -> list[float]:
    out = []
    for msg_id in ids:
        started = time.perf_counter()
        found = admin.query_message_by_id(msg_id)
        out.append((time.perf_counter() - started) * 1000)
        assert msg_id in (found.msg_id, found.offset_msg_id)
    return out


def ceiling(db: Path, keys: list[str]) -> list[float]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    out = []
    for key in keys:
        started = time.perf_counter()
        rows = conn.execute("SELECT phys, idx FROM keys WHERE topic = ? AND key = ? LIMIT 32", (TOPIC, key)).fetchall()
        out.append((time.perf_counter() - started) * 1000)
        assert rows
    conn.close()
    return out


def show(name: str, ms: list[float]) -> float:
    median = statistics.median(ms)
    p99 = sorted(ms)[int(len(ms) * 0.99) - 1]
    print(f"  {name:<34} median {median:8.3f} ms   p99 {p99:8.3f} ms")
    return median


def main() -> None:
    compiled.require_fresh()  # the checkout's build, as the source is now
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--lookups", type=int, default=200)
    args = parser.parse_args()
    with LocalCluster(brokers=1, processes=True) as cluster, Admin(cluster.nameserver) as admin:
        admin.create_topic(TOPIC, 8)
        started = time.monotonic()
        sent = []
        with Producer(cluster.nameserver) as producer:
            for first in range(0, args.messages, BATCH):
                batch = [Message(TOPIC, b"x" * 100, keys=f"key-{i}") for i in range(first, first + BATCH)]
                sent += producer.send_batch(batch)
        sent_s = time.monotonic() - started
        behind_s = wait_for(admin, f"key-{args.messages - 1}")
        db = cluster.data_dir / "broker-a" / "index" / "keys.db"
        size = sum(p.stat().st_size for p in db.parent.iterdir())
        print(
            f"{args.messages:,} messages with a key each, sent in {sent_s:.1f} s ({args.messages / sent_s:,.0f} msg/s)"
        )
        print(f"index caught up {behind_s:.1f} s after the last send; {size / 2**20:.0f} MiB on disk")
        keys = [f"key-{random.randrange(args.messages)}" for _ in range(args.lookups)]
        print(f"look-up of one key among {args.messages:,} ({args.lookups} random keys):")
        ours = show("Admin.query_messages (end to end)", lookups(admin, keys))
        best = show("ceiling: SQLite look-up alone", ceiling(db, keys))
        print(f"  end to end / ceiling: {ours / best:.1f}x; target under 50 ms: {'met' if ours < 50 else 'NOT met'}")
        picked = [random.choice(sent) for _ in range(args.lookups)]
        client_ids = [r.msg_ids()[random.randrange(r.count)] for r in picked]
        print(f"look-up of one message by id among {args.messages:,} ({args.lookups} random messages):")
        show("by client id (msg_id)", id_lookups(admin, client_ids))
        offset_ids = [admin.query_message_by_id(i).offset_msg_id for i in client_ids[:50]]
        show("by offset id (offset_msg_id)", id_lookups(admin, offset_ids))
        cluster.kill_broker("broker-a")
        restarted = time.monotonic()
        cluster.start_broker("broker-a")
        wait_for(admin, keys[0], timeout_s=60)
        again = time.monotonic() - restarted
        print(f"after SIGKILL and restart: found again {again:.1f} s after the restart began")
        show("Admin.query_messages after restart", lookups(admin, keys[:50]))


if __name__ == "__main__":
    main()
