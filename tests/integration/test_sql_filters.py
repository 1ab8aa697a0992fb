"""SQL92 property filters on real broker processes: the broker answers only the batches that
hold a message an expression selects, our Consumer and GroupConsumer get exactly the selected
messages out of mixed batches, and a bad expression is refused at subscribe time with where it
goes wrong (by the client, and by the broker for a client that did not check)."""

from __future__ import annotations

import threading

import pytest

from rocketspark import Admin, Consumer, GroupConsumer, LocalCluster, Message, Producer, PullStatus
from rocketspark.codec.columns import decode
from rocketspark.errors import IllegalFilterExpressionError, InvalidParameterError
from rocketspark.protocol.codes import RequestCode, ResponseCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.remoting.client import check
from tests.helpers import eventually

pytestmark = pytest.mark.integration

SQL = "region = 'eu' AND amount > 100 AND TAGS IN ('order', 'refund')"


def _wanted(m: Message) -> bool:
    """SQL, spelled out by hand (amounts are whole numbers here)."""
    p = m.properties or {}
    return p.get("region") == "eu" and int(p.get("amount", "0")) > 100 and m.tags in ("order", "refund")


def _mixed(topic: str, batch: int) -> list[Message]:
    """A batch where some messages match, some do not, and some lack the properties."""
    out = []
    for i in range(20):
        properties = {"region": ("eu", "us")[i % 2], "amount": str(50 * (i % 5))} if i % 7 else None
        tag = ("order", "refund", "ping")[i % 3]
        out.append(Message(topic, f"b{batch}-m{i}".encode(), tags=tag, properties=properties))
    return out


@pytest.fixture
def filled(shared_cluster: LocalCluster, topic_name: str) -> tuple[str, list[Message]]:
    """One queue of mixed batches, and batches where nothing matches, one record each."""
    with Admin(shared_cluster.nameserver) as admin:
        admin.create_topic(topic_name, queues=1, brokers=["broker-a"])
    sent: list[Message] = []
    with Producer(shared_cluster.nameserver) as producer:
        for batch in range(6):
            messages = _mixed(topic_name, batch)
            if batch in (1, 2):  # nothing in these two matches
                messages = [Message(topic_name, m.body, tags="ping", properties=m.properties) for m in messages]
            results = producer.send_batch(messages)
            assert len(results) == 1  # one record
            sent += messages
    return topic_name, sent


def _raw_pull(cluster: LocalCluster, consumer: Consumer, topic: str, offset: int, **ext: object) -> RemotingCommand:
    request = RemotingCommand.request(
        RequestCode.PULL_MESSAGE, {"topic": topic, "queueId": 0, "queueOffset": offset, "maxMsgNums": 1000, **ext}
    )
    return consumer.remoting.invoke(cluster.brokers["broker-a"], request, 10_000)


def test_the_consumer_gets_exactly_the_selected_messages_out_of_mixed_batches(
    shared_cluster: LocalCluster, filled: tuple[str, list[Message]]
) -> None:
    topic, sent = filled
    expected = [m.body for m in sent if _wanted(m)]
    assert 0 < len(expected) < len(sent)
    with Consumer(shared_cluster.nameserver) as consumer:
        got = [m for r in consumer.iter_range(topic, 0, 0, batch=7, sql=SQL) for m in r.messages]
        assert [m.body for m in got] == expected
        assert all(m.properties["region"] == "eu" for m in got)
        pulled = consumer.pull(topic, 0, 0, 1000, sql=SQL)
        assert [m.body for m in pulled.messages] == expected
        followed: list[bytes] = []
        for result in consumer.follow(topic, 0, 0, sql=SQL, window_ms=2000):
            followed += [m.body for m in result.messages]
            if len(followed) >= len(expected):
                break
        assert followed == expected


def test_the_broker_answers_only_the_batches_holding_a_selected_message(
    shared_cluster: LocalCluster, filled: tuple[str, list[Message]]
) -> None:
    topic, sent = filled
    with Consumer(shared_cluster.nameserver) as consumer:
        everything = _raw_pull(shared_cluster, consumer, topic, 0)
        answered = _raw_pull(shared_cluster, consumer, topic, 0, sql=SQL)
        assert answered.code == ResponseCode.SUCCESS
        batches = sorted({int(o) // 20 for o in decode(answered.body).queue_offset})
        assert batches == [0, 3, 4, 5]  # whole records, the two without a match skipped
        assert len(answered.body) < len(everything.body)
        # a read that finds nothing after its offset goes on to the end and says where it got to
        nothing = _raw_pull(shared_cluster, consumer, topic, 21, sql="region = 'nowhere'")
        assert nothing.code == ResponseCode.PULL_RETRY_IMMEDIATELY
        assert int(nothing.ext["next"]) == len(sent) and not nothing.body
        skipped = _raw_pull(shared_cluster, consumer, topic, 20, sql=SQL)  # starts in a batch without a match
        assert sorted({int(o) // 20 for o in decode(skipped.body).queue_offset}) == [3, 4, 5]


def test_a_bad_expression_is_refused_at_subscribe_with_where_it_goes_wrong(
    shared_cluster: LocalCluster, filled: tuple[str, list[Message]]
) -> None:
    topic, _ = filled
    with Consumer(shared_cluster.nameserver) as consumer:
        with pytest.raises(IllegalFilterExpressionError) as refused:
            consumer.pull(topic, 0, 0, sql="region = 'eu' AND amount >")
        assert refused.value.details["position"] == len("region = 'eu' AND amount >")
        assert "at line 1, column 27" in refused.value.message
        with pytest.raises(IllegalFilterExpressionError):
            list(consumer.iter_range(topic, 0, 0, sql="NOT region = 'eu'"))
        # a client that sends it anyway is told the same by the broker (RocketMQ's code 23)
        answer = _raw_pull(shared_cluster, consumer, topic, 0, sql="amount > 'x'")
        assert answer.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
        with pytest.raises(IllegalFilterExpressionError) as from_broker:
            check(answer)
        assert from_broker.value.details["position"] == 9 and "compares numbers" in from_broker.value.message
        with pytest.raises(IllegalFilterExpressionError):
            GroupConsumer(shared_cluster.nameserver, "g-bad-sql", topic, lambda batch: None, sql="amount >> 1")
        with pytest.raises(InvalidParameterError, match="tags or by an SQL92 expression, not both"):
            consumer.pull(topic, 0, 0, tags="order", sql="amount > 1")
        both = _raw_pull(shared_cluster, consumer, topic, 0, sql="amount > 1", tags=["order"])
        assert both.code == ResponseCode.INVALID_PARAMETER and "not both" in both.remark
        assert consumer.pull(topic, 0, 0, 1000, tags="ping").status is PullStatus.FOUND  # tags still work


def test_a_group_consumer_with_an_sql_subscription_gets_each_selected_message(
    shared_cluster: LocalCluster, filled: tuple[str, list[Message]]
) -> None:
    topic, sent = filled
    expected = sorted(m.body for m in sent if _wanted(m))
    got: list[bytes] = []
    lock = threading.Lock()

    def handle(batch: list[object]) -> None:
        with lock:
            got.extend(m.body for m in batch)  # type: ignore[attr-defined]

    group = GroupConsumer(shared_cluster.nameserver, f"g-{topic}", topic, handle, sql=SQL, start_from="earliest")
    group.start()
    try:
        eventually(lambda: len(got) >= len(expected), timeout_s=30)
    finally:
        group.stop()
    assert sorted(got) == expected
