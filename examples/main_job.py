"""The main job (``make run``): a Spark streaming ETL over a static topic, with a remap and a
master failover mid-stream.

1. starts a local cluster: a nameserver (with the replica-group controller) and three broker
   groups of two replicas each (``in_sync_replicas = 2``: every event is on both replicas
   before it is acknowledged), as processes;
2. creates the static topics ``orders`` (8 logical queues on broker-a and broker-b) and
   ``customer-totals`` (4 logical queues);
3. produces a stream of order events in the background;
4. runs the streaming ETL of ``examples/streaming_etl.py`` (running totals per customer);
5. moves logical queues 0 and 1 of ``orders`` to broker-c while the query runs, SIGKILLs the
   master of broker-a (its slave takes over; the killed replica is restarted and rejoins),
   then produces the second half of the events;
6. waits until every event is processed, then prints the query's progress, the totals
   read back from ``customer-totals``, and whether they match what was produced.
"""

from __future__ import annotations

import json
import os
import random
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from streaming_etl import SOURCE, TARGET, build_query

from rocketspark import Admin, Consumer, LocalCluster, Message, Producer

EVENTS = 20_000
CUSTOMERS = 40
REPLICAS = 2
BROKER = {
    "in_sync_replicas": 2,
    "controller_heartbeat_interval_ms": 300,
    "master_lease_ms": 1500,
    "ha_max_time_slave_not_catchup_ms": 3000,
}
HEARTBEAT_TIMEOUT = {"controller_broker_heartbeat_timeout_ms": 2000}


def produce(nameserver: str, events: list[dict[str, Any]], done: threading.Event) -> None:
    with Producer(nameserver, send_timeout_ms=20_000) as producer:  # rides over a failover
        for start in range(0, len(events), 500):
            chunk = events[start : start + 500]
            producer.send_batch([Message(SOURCE, json.dumps(e).encode(), sharding_key=e["customer"]) for e in chunk])
            time.sleep(0.3)
    done.set()


def wait_in_sync(nameserver: str, cluster: LocalCluster, timeout_s: float = 60) -> None:
    """Until every replica of every group is in its group's SyncStateSet."""
    deadline = time.monotonic() + timeout_s
    with Admin(nameserver) as admin:
        while any(len(g.sync_state_set) < REPLICAS for g in admin.replica_groups().values()):
            if time.monotonic() > deadline:
                raise SystemExit("the replica groups did not get in sync")
            time.sleep(0.2)


def fail_over(cluster: LocalCluster, group: str) -> None:
    """SIGKILL the group's master mid-stream; once its slave has taken over, restart it (it
    rejoins as a slave, cutting whatever it held that was never acknowledged)."""
    with Admin(cluster.nameserver) as admin:
        master = admin.replica_groups()[group].master
        assert master is not None
        cluster.kill(master)
        killed = time.monotonic()
        while admin.replica_groups()[group].master in (None, master):
            time.sleep(0.1)
        now = admin.replica_groups()[group]
        print(
            f"killed {group}'s master {master} mid-stream; {now.master} took over in {time.monotonic() - killed:.1f} s"
        )
        cluster.restart(master)
        print(f"restarted {master}: it rejoins {group} as a slave")


def caught_up(query: Any, latest: dict[str, int]) -> bool:
    """The query's last batch ended at the topic's latest offsets."""
    progress = query.lastProgress
    if not progress or not progress["sources"] or not progress["sources"][0]["endOffset"]:
        return False
    return bool(json.loads(progress["sources"][0]["endOffset"])[SOURCE] == latest)


def main() -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    rng = random.Random(11)
    events = [
        {"order": i, "customer": f"c{rng.randrange(CUSTOMERS):02d}", "amount": round(rng.uniform(1, 200), 2)}
        for i in range(EVENTS)
    ]
    cluster = LocalCluster(
        brokers=3, replicas=REPLICAS, processes=True, broker_config=BROKER, nameserver_config=HEARTBEAT_TIMEOUT
    )
    with cluster, tempfile.TemporaryDirectory() as work:
        ns = cluster.nameserver
        print(f"cluster: nameserver {ns}, broker groups {', '.join(cluster.brokers)} ({REPLICAS} replicas each)")
        wait_in_sync(ns, cluster)
        with Admin(ns) as admin:
            admin.create_static_topic(SOURCE, 8, brokers=["broker-a", "broker-b"])
            admin.create_static_topic(TARGET, 4, brokers=["broker-a", "broker-b"])
        print(f"static topics: {SOURCE} (8 logical queues), {TARGET} (4), on broker-a and broker-b")

        spark = (
            SparkSession.builder.master("local[2]")
            .appName("rocketspark-main-job")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "4")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        done = threading.Event()
        half = len(events) // 2
        first_half = threading.Thread(target=produce, args=(ns, events[:half], threading.Event()), daemon=True)
        first_half.start()
        query = build_query(
            spark, ns, str(Path(work) / "checkpoint"), trigger_seconds=0.5, max_offsets_per_trigger=4000
        )
        print("streaming ETL started; producing events")

        while not any(p["numInputRows"] for p in query.recentProgress):  # remap once data flows
            if query.exception() is not None:
                raise query.exception()
            time.sleep(0.2)
        with Admin(ns) as admin:
            result = admin.remap_static_topic(SOURCE, [0, 1], "broker-c")
            for queue, src, dst, start in result.moved:
                print(f"remapped {SOURCE} logical queue {queue} mid-stream: {src} -> {dst}, new segment from {start}")
        fail_over(cluster, "broker-a")
        first_half.join()
        threading.Thread(target=produce, args=(ns, events[half:], done), daemon=True).start()

        done.wait(300)
        with Consumer(ns) as consumer:
            latest = {str(q): consumer.max_offset(SOURCE, q) for q in range(8)}
        deadline = time.monotonic() + 300
        while not caught_up(query, latest) and time.monotonic() < deadline:
            if query.exception() is not None:
                raise query.exception()
            time.sleep(0.5)
        progress = [p for p in query.recentProgress if p["numInputRows"]]
        query.stop()
        rows = sum(p["numInputRows"] for p in progress)
        print(
            f"query: {len(progress)} micro-batches with data, {rows} input rows "
            f"(as many as events produced: {rows == EVENTS})"
        )
        print(f"last batch end offsets: {progress[-1]['sources'][0]['endOffset']}")
        with Admin(ns) as admin:
            queue0 = admin.topic_status(SOURCE)[0]
        segments = ", ".join(
            f"{s.broker_name} [{s.logical_start}, {s.logical_end or ''}) {s.state.value}" for s in queue0.segments
        )
        print(f"{SOURCE} logical queue 0 now: {segments}")

        totals = (
            spark.read.format("rocketmq")
            .option("nameserver", ns)
            .option("topic", TARGET)
            .load()
            .select(
                F.from_json(F.col("body").cast("string"), "customer string, orders long, total double").alias("t"),
                "queueId",
                "queueOffset",
            )
            .select("t.*", "queueId", "queueOffset")
        )
        latest = {r.customer: (r.orders, r.total) for r in totals.orderBy("queueOffset").collect()}
        expected: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
        for e in events:
            expected[e["customer"]][0] += 1
            expected[e["customer"]][1] += e["amount"]
        matches = all(
            latest.get(c, (0, 0))[0] == n and abs(latest[c][1] - total) < 0.05 for c, (n, total) in expected.items()
        )
        print("customer totals read back from the output topic (first 5):")
        for customer in sorted(latest)[:5]:
            print(f"  {customer}: {latest[customer][0]} orders, total {latest[customer][1]:.2f}")
        print(f"all {len(expected)} customer totals match the events produced: {matches}")
        spark.stop()
    print("cluster stopped")
    if not matches or rows != EVENTS:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
