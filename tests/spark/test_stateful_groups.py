"""transformWithState keyed on the message group (examples/customer_sessions.py): per-customer
running totals and sessions closed by a timer, exactly once across a stop mid-way (messages
left unread, maybe a batch cut short), a re-run of the last micro-batch and a restart from the
same checkpoint with more messages.

What the output must be is a plain Python fold over the messages as sent, group by group. The
sessions' boundaries depend on when batches ran (a processing-time timeout), so for them the
test checks what holds at any speed: each group's sessions cover its messages once, in order,
and each carries the fold's figures; the last one was closed by the timer."""

from __future__ import annotations

import importlib.util
import json
import sys
from collections import defaultdict
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from pyspark.testing import assertDataFrameEqual

from rocketspark import Admin, Consumer, LocalCluster, Message, Producer
from tests.helpers import eventually
from tests.spark.helpers import forget_last_commit

pytestmark = [pytest.mark.spark, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
GROUPS = [f"customer-{i}" for i in range(6)]
QUEUES = 4
OUTPUT = "customer string, n long, amount long, total long"


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("customer_sessions", ROOT / "examples" / "customer_sessions.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def payments(start: int, count: int) -> list[tuple[str, int]]:
    """(group, amount in cents) in send order; some groups pause, some amounts are refunds."""
    return [(GROUPS[(i * 7 + i // 9) % len(GROUPS)], (i * 37) % 500 - 100) for i in range(start, start + count)]


def send(ns: str, topic: str, sent: list[tuple[str, int]]) -> None:
    # Our Producer routes by sharding_key and stores it as __SHARDINGKEY (as a v2 client's
    # message_group and the sink's shardingKey are stored), which the query keys on.
    with Producer(ns) as producer:
        producer.send_batch([Message(topic, json.dumps({"amount": a}).encode(), sharding_key=g) for g, a in sent])


def fold(sent: list[tuple[str, int]]) -> dict[str, list[tuple[int, int]]]:
    """Per group, (amount, total after it) for each of its payments in send order."""
    out: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for group, amount in sent:
        out[group].append((amount, (out[group][-1][1] if out[group] else 0) + amount))
    return out


def activity(ns: str, topic: str) -> list[dict[str, Any]]:
    with Consumer(ns) as consumer:
        return [json.loads(m.body) for q in range(QUEUES) for r in consumer.iter_range(topic, q, 0) for m in r.messages]


def by_group(rows: list[dict[str, Any]], kind: str) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in sorted((r for r in rows if r["kind"] == kind), key=lambda r: r["firstOffset"]):
        out[row["customer"]].append(row)
    return out


def running(query: Any) -> None:
    if query.exception() is not None:
        raise query.exception()  # no use waiting for its output


def paid_out(query: Any, ns: str, topic: str, count: int) -> bool:
    running(query)
    return sum(r["kind"] == "payment" for r in activity(ns, topic)) >= count


def all_closed(query: Any, ns: str, topic: str, count: int) -> bool:
    """Every payment is out, and each group's last payment is in a closed session."""
    running(query)
    rows = activity(ns, topic)
    paid, sessions = by_group(rows, "payment"), by_group(rows, "session")
    done = sum(map(len, paid.values())) >= count
    return done and all(sessions[g] and sessions[g][-1]["lastOffset"] == paid[g][-1]["firstOffset"] for g in paid)


def test_per_group_totals_and_sessions_are_exactly_once_across_a_restart(
    spark: Any, cluster: LocalCluster, tmp_path: Path
) -> None:
    example, ns, source, target = load_example(), cluster.nameserver, "tws-payments", "tws-activity"
    with Admin(ns) as admin:
        admin.create_topic(source, QUEUES, brokers=["broker-a"])
        admin.create_topic(target, QUEUES, brokers=["broker-b"])
    checkpoint, first, second = tmp_path / "cp", payments(0, 240), payments(240, 160)

    def start() -> Any:
        return example.build_query(
            spark, ns, str(checkpoint), source=source, target=target, session_timeout_ms=2000,
            trigger_seconds=0.5, max_offsets_per_trigger=60,
        )  # fmt: skip

    try:
        send(ns, source, first)
        query = start()
        eventually(lambda: paid_out(query, ns, target, len(first) // 2), 120, 0.5)
        query.stop()  # mid-way: 60 messages a batch, so 2 or 3 batches in, maybe one cut short
        forget_last_commit(checkpoint)  # and as if the driver had died before recording the last one
        send(ns, source, second)
        query = start()
        eventually(lambda: all_closed(query, ns, target, len(first) + len(second)), 120, 0.5)
        query.stop()
    finally:
        spark.conf.unset("spark.sql.streaming.stateStore.providerClass")
    assert query.exception() is None

    rows, expected = activity(ns, target), fold(first + second)
    paid, sessions = by_group(rows, "payment"), by_group(rows, "session")
    assertDataFrameEqual(
        spark.createDataFrame(
            [(g, n, r["amount"], r["total"]) for g, rs in paid.items() for n, r in enumerate(rs)], OUTPUT
        ),
        spark.createDataFrame([(g, n, a, t) for g, fs in expected.items() for n, (a, t) in enumerate(fs)], OUTPUT),
    )
    for group, closed in sessions.items():
        offsets = [r["firstOffset"] for r in paid[group]]
        assert [s["firstOffset"] for s in closed] == [offsets[0]] + [
            offsets[offsets.index(s["lastOffset"]) + 1] for s in closed[:-1]
        ], f"{group}'s sessions do not cover its payments once, in order"
        assert closed[-1]["lastOffset"] == offsets[-1], f"{group}'s last session was not closed by its timer"
        for s in closed:
            span = expected[group][offsets.index(s["firstOffset"]) : offsets.index(s["lastOffset"]) + 1]
            assert (s["payments"], s["amount"], s["total"]) == (len(span), sum(a for a, _ in span), span[-1][1])
    assert set(sessions) == set(expected)
