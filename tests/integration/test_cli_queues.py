"""``rocketspark admin`` numbers a topic's queues one way (issue 30): as ``Consumer.queues`` and
Spark's ``queueId`` do, with the broker in its own column; many sends are summed up; a group
that committed nothing is said to be one; times without a zone are UTC, and printed with it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from rocketspark import Consumer, LocalCluster, Message, Producer
from tests.helpers import eventually

pytestmark = pytest.mark.integration
CLI = [sys.executable, "-m", "rocketspark.cli"]


def admin(nameserver: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, "admin", "-n", nameserver, *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "200", **env},
    )


def rows_of(nameserver: str, *args: str) -> list[dict[str, Any]]:
    """The rows of the command's one table, from its --json document."""
    done = admin(nameserver, "--json", *args)
    assert done.returncode == 0, done.stderr
    [table] = json.loads(done.stdout)["tables"]
    rows: list[dict[str, Any]] = table["rows"]
    return rows


def test_every_command_numbers_a_topics_queues_as_spark_does(shared_cluster: LocalCluster, topic_name: str) -> None:
    ns = shared_cluster.nameserver
    assert admin(ns, "create-topic", topic_name, "--queues", "4").returncode == 0
    with Producer(ns) as producer, Consumer(ns) as consumer:
        on_b = producer.send(Message(topic_name, b"on b", keys="kb", queue_id=6))
        assert (on_b.broker_name, on_b.queue_id) == ("broker-b", 2)  # the broker's own queue 2
        assert [(q.queue_id, q.segments[0].broker_name) for q in consumer.queues(topic_name)][6] == (6, "broker-b")
        consumer.commit_offset("g", topic_name, 6, 1)

        [sent] = rows_of(ns, "send", topic_name, "hi", "--keys", "ka")
        pulled = consumer.pull(topic_name, sent["queue #"], sent["queue offset"], 1).messages
        assert [(m.msg_id, m.broker_name) for m in pulled] == [(sent["msg id"], sent["broker"])]

    def by_key() -> list[dict[str, Any]]:
        return rows_of(ns, "query-msg", topic_name, "--key", "kb")

    [found] = eventually(by_key, timeout_s=15)  # indexed once flushed
    assert (found["queue #"], found["broker"], found["queue offset"]) == (6, "broker-b", 0)
    assert found["stored"].endswith(" UTC")
    [by_id] = eventually(lambda: rows_of(ns, "query-msg", "--id", on_b.msg_id), timeout_s=15)
    assert (by_id["queue #"], by_id["broker"]) == (6, "broker-b")
    [by_offset_id] = rows_of(ns, "query-msg", "--id", on_b.offset_msg_id)
    assert (by_offset_id["queue #"], by_offset_id["broker"]) == (6, "broker-b")
    read = {r["body"]: (r["queue #"], r["broker"]) for r in rows_of(ns, "consume", topic_name, "--wait", "0.5")}
    assert read["on b"] == (6, "broker-b") and read["hi"] == (sent["queue #"], sent["broker"])

    progress = rows_of(ns, "progress", "g", topic_name)
    assert [(r["queue #"], r["broker"], r["consumer offset"]) for r in progress if r["consumer offset"] >= 0] == [
        (6, "broker-b", 1)
    ]
    status = rows_of(ns, "status", topic_name)
    assert [(r["queue #"], r["broker"], r["physical queue"]) for r in status][6] == (6, "broker-b", 2)
    reset = rows_of(ns, "reset-offset", "g", topic_name, "--earliest")
    assert [(r["queue #"], r["broker"]) for r in reset] == [(q, "broker-a" if q < 4 else "broker-b") for q in range(8)]


def test_many_sends_print_a_summary_and_one_send_its_row(shared_cluster: LocalCluster, topic_name: str) -> None:
    ns = shared_cluster.nameserver
    assert admin(ns, "create-topic", topic_name, "--queues", "4").returncode == 0
    done = admin(ns, "--json", "send", topic_name, "m", "--count", "200")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    [summary] = document["tables"]
    assert summary["title"] == f"sent 200 messages to {topic_name}"
    assert {r["broker"]: r["queues #"] for r in summary["rows"]} == {"broker-a": "0-3", "broker-b": "4-7"}
    assert sum(r["messages"] for r in summary["rows"]) == 200
    status, first, last = document["messages"]
    assert status == "status: SEND_OK 200"
    assert first.startswith("first: msg id ") and last.startswith("last: msg id ")
    with Consumer(ns) as consumer:  # the last one is where the summary says
        words = last.split()
        queue, offset = int(words[5].strip(",#")), int(words[-1])
        [message] = consumer.pull(topic_name, queue, offset, 1).messages
        assert (message.msg_id, message.body, message.broker_name) == (
            words[3].strip(","),
            b"m 199",
            words[7].strip(","),
        )

    shown = admin(ns, "send", topic_name, "many", "--count", "1000")  # a person's view: a few lines, not 1,000 rows
    assert shown.returncode == 0 and len(shown.stdout.splitlines()) < 15
    assert "status: SEND_OK 1000" in shown.stdout
    assert len(rows_of(ns, "send", topic_name, "one")) == 1


def test_progress_of_a_group_that_committed_nothing_says_so(shared_cluster: LocalCluster, topic_name: str) -> None:
    ns = shared_cluster.nameserver
    assert admin(ns, "create-topic", topic_name, "--queues", "2").returncode == 0
    said = (
        f'error: group "nogroup" has committed no offset on {topic_name}: no such consumer group, or it has not '
        f"consumed {topic_name} yet (every group and its topics: rocketspark admin groups)"
    )
    done = admin(ns, "progress", "nogroup", topic_name)
    assert (done.returncode, done.stdout, done.stderr.splitlines()) == (3, "", [said])
    as_json = admin(ns, "progress", "nogroup", topic_name, "--json")
    assert as_json.returncode == 3
    assert json.loads(as_json.stdout) == {"tables": [], "messages": [], "error": said.removeprefix("error: ")}
    with Consumer(ns) as consumer:
        consumer.commit_offset("somegroup", topic_name, 3, 0)
    committed = admin(ns, "progress", "somegroup", topic_name)
    assert committed.returncode == 0 and "total lag: 0" in committed.stdout


def test_times_without_a_zone_are_read_as_utc_and_printed_with_it(
    shared_cluster: LocalCluster, topic_name: str
) -> None:
    ns = shared_cluster.nameserver
    assert admin(ns, "create-topic", topic_name, "--queues", "1", "--brokers", "broker-a").returncode == 0
    with Producer(ns) as producer:
        producer.send_batch([Message(topic_name, b"before")] * 3)
        time.sleep(1.2)
        middle = datetime.now(UTC).replace(microsecond=0)
        time.sleep(0.2)
        producer.send_batch([Message(topic_name, b"after")] * 2)
    naive = middle.strftime("%Y-%m-%dT%H:%M:%S")  # as a person types it: no zone
    ms = int(middle.timestamp() * 1000)
    said = f"reset to the first message stored at or after {middle:%Y-%m-%d %H:%M:%S}.000 UTC ({ms} ms since the epoch)"
    in_tokyo = middle.astimezone(timezone(timedelta(hours=9))).isoformat()
    for given in (naive, naive + "Z", middle.isoformat(), in_tokyo, str(ms)):
        done = admin(ns, "--json", "reset-offset", "g", topic_name, "--timestamp", given, TZ="Asia/Tokyo")
        assert done.returncode == 0, done.stderr
        document = json.loads(done.stdout)
        assert document["messages"][0] == said, given
        assert document["tables"][0]["rows"] == [{"queue #": 0, "broker": "broker-a", "offset": 3}]
    in_paris = admin(ns, "reset-offset", "g", topic_name, "--timestamp", naive + "+01:00", TZ="Asia/Tokyo")
    assert f"({ms - 3_600_000} ms since the epoch)" in in_paris.stdout  # a zone given is the zone used
    stored = rows_of(ns, "consume", topic_name, "--count", "1")[0]["stored"]
    assert datetime.strptime(stored, "%Y-%m-%d %H:%M:%S.%f UTC").replace(tzinfo=UTC) < middle
