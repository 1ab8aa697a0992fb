"""The Spark source's ``msgId`` is the id a send returned (issue 27), and the sink gives every
row an id of its own, consecutive within each batch record it writes."""

from __future__ import annotations

from typing import Any

import pytest

from rocketspark import Admin, Consumer, LocalCluster, Message, Producer

pytestmark = pytest.mark.spark


def read(spark: Any, ns: str, topic: str) -> list[Any]:
    df = spark.read.format("rocketmq").option("nameserver", ns).option("topic", topic).load()
    return list(df.orderBy("queueId", "queueOffset").collect())


def test_msg_id_is_the_id_the_send_returned(spark: Any, cluster: LocalCluster) -> None:
    ns = cluster.nameserver
    with Admin(ns) as admin:
        admin.create_static_topic("ids-read", 2, brokers=["broker-a", "broker-b"])
    with Producer(ns) as producer:
        one = producer.send(Message("ids-read", b"one", queue_id=0))
        own = producer.send(Message("ids-read", b"own", queue_id=0, properties={"UNIQ_KEY": "01-from-elsewhere"}))
        [batch] = producer.send_batch([Message("ids-read", f"b{i}".encode(), queue_id=1) for i in range(40_000)])
    assert own.msg_id == "01-from-elsewhere"
    rows = read(spark, ns, "ids-read")
    assert [(r.body, r.msgId) for r in rows[:2]] == [(b"one", one.msg_id), (b"own", own.msg_id)]
    assert [r.msgId for r in rows[2:]] == batch.msg_ids()  # an Arrow batch of 32,768 rows and the rest
    with Consumer(ns) as consumer:
        stored = [m for q in (0, 1) for r in consumer.iter_range("ids-read", q, 0) for m in r.messages]
    assert [m.msg_id for m in stored] == [r.msgId for r in rows]


def test_the_sink_gives_each_row_its_own_id(spark: Any, cluster: LocalCluster) -> None:
    ns = cluster.nameserver
    with Admin(ns) as admin:
        admin.create_static_topic("ids-sink", 1, brokers=["broker-c"])
    rows = spark.createDataFrame([(f"row-{i}",) for i in range(3000)], "value string").repartition(3)
    rows.write.format("rocketmq").mode("append").option("nameserver", ns).option("topic", "ids-sink").save()
    with Consumer(ns) as consumer:
        stored = [m for r in consumer.iter_range("ids-sink", 0, 0) for m in r.messages]
    assert len(stored) == 3000 and len({m.msg_id for m in stored}) == 3000
    assert all(m.client_id == m.msg_id for m in stored)  # a client id, not the offset id fallback
    by_record: dict[int, list[int]] = {}
    for m in stored:
        by_record.setdefault(m.commitlog_offset, []).append(int(m.msg_id, 16) - m.batch_index)
    assert all(len(set(firsts)) == 1 for firsts in by_record.values())  # consecutive within each record
    assert [r.msgId for r in read(spark, ns, "ids-sink")] == [m.msg_id for m in stored]
