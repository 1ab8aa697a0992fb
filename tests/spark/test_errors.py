"""Bad input fails when the query starts, with one sentence naming the option and the fix."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rocketspark import Admin, LocalCluster
from tests.helpers import free_port
from tests.spark.helpers import run_available_now

pytestmark = pytest.mark.spark


def load(spark: Any, **options: str) -> Any:
    stream = spark.readStream.format("rocketmq")
    for key, value in options.items():
        stream = stream.option(key, value)
    return stream.load()


def failure_of(action: Any) -> str:
    with pytest.raises(Exception) as info:  # Spark wraps the Python error in its own exception types
        action()
    return str(info.value)


def test_a_missing_nameserver_option_fails_at_load(spark: Any) -> None:
    text = failure_of(lambda: load(spark, topic="t"))
    assert 'option "nameserver" is required: .option("nameserver", "127.0.0.1:9876")' in text


def test_a_malformed_nameserver_address_fails_at_load(spark: Any) -> None:
    text = failure_of(lambda: load(spark, nameserver="localhost", topic="t"))
    assert 'option "nameserver": "localhost" is not a valid address: expected host:port' in text


def test_contradictory_topic_options_fail_at_load(spark: Any) -> None:
    text = failure_of(lambda: load(spark, nameserver="127.0.0.1:9876", topic="a", topicPattern="a.*"))
    assert 'set exactly one of the options "topic", "topicPattern" or "assign" (got topic, topicPattern)' in text


def test_an_unparsable_starting_offsets_fails_at_load(spark: Any) -> None:
    text = failure_of(lambda: load(spark, nameserver="127.0.0.1:9876", topic="a", startingOffsets="{oops"))
    assert 'option "startingOffsets" is not valid JSON' in text and '"earliest", "latest"' in text


def test_a_misspelt_option_is_caught_with_a_suggestion(spark: Any) -> None:
    text = failure_of(lambda: load(spark, nameserver="127.0.0.1:9876", topic="a", startingOffset="earliest"))
    assert 'unknown source option "startingoffset"; did you mean "startingOffsets"?' in text


def test_an_unreachable_nameserver_fails_when_the_query_starts(spark: Any, tmp_path: Path) -> None:
    address = f"127.0.0.1:{free_port()}"
    events = load(spark, nameserver=address, topic="orders")
    text = failure_of(lambda: run_available_now(events, str(tmp_path / "cp"), name="unreachable", timeout=120))
    assert f'cannot reach the nameserver given by option "nameserver" ({address})' in text
    assert "connection refused" in text


def test_an_unknown_topic_fails_when_the_query_starts(spark: Any, cluster: LocalCluster, tmp_path: Path) -> None:
    events = load(spark, nameserver=cluster.nameserver, topic="no-such-topic")
    text = failure_of(lambda: run_available_now(events, str(tmp_path / "cp"), name="unknown", timeout=120))
    assert 'topic "no-such-topic" (option "topic") does not exist on the cluster at' in text
    assert "rocketspark admin create-topic no-such-topic" in text


def test_the_sink_needs_a_body_column_and_a_topic(spark: Any, cluster: LocalCluster, tmp_path: Path) -> None:
    with Admin(cluster.nameserver) as admin:
        admin.create_topic("sink-errors", queues=1, brokers=["broker-a"])
    rows = spark.createDataFrame([("x",)], "text string")
    text = failure_of(
        lambda: (
            rows.write.format("rocketmq")
            .mode("append")
            .option("nameserver", cluster.nameserver)
            .option("topic", "sink-errors")
            .save()
        )
    )
    assert 'the rocketmq sink does not know the column "text"' in text
    no_topic = spark.createDataFrame([("x",)], "body string")
    text = failure_of(
        lambda: no_topic.write.format("rocketmq").mode("append").option("nameserver", cluster.nameserver).save()
    )
    assert 'set the option "topic" or give the rows a "topic" column' in text


def test_a_kafka_option_is_answered_with_ours(spark: Any) -> None:
    text = failure_of(lambda: load(spark, **{"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "a"}))
    assert 'unknown source option "kafka.bootstrap.servers", a Kafka connector option: use "nameserver"' in text
    text = failure_of(lambda: load(spark, nameserver="127.0.0.1:9876", subscribePattern="orders-.*"))
    assert 'unknown source option "subscribepattern" (Kafka\'s "subscribePattern"): use "topicPattern"' in text
    text = failure_of(lambda: load(spark, nameserver="127.0.0.1:9876", subscribe="orders"))
    assert 'unknown source option "subscribe", a Kafka connector option: use "topic"' in text


def test_a_refused_option_reaches_the_user_in_a_few_lines(spark: Any) -> None:
    """Spark's first line is its own (PYTHON_DATA_SOURCE_ERROR, then "Traceback"), whatever the
    data source raises; what follows is one short traceback of ours, the sentence on its last
    line, not the parser's whole stack (about 1.5 KB before)."""
    text = failure_of(lambda: load(spark, nameserver="127.0.0.1:9876", topic="a", startingOffset="earliest"))
    lines = text.strip().splitlines()
    assert lines[0].startswith("[PYTHON_DATA_SOURCE_ERROR]")
    assert len(text) < 500 and len(lines) <= 5, text  # Spark's line, one frame of ours, the sentence
    assert "option_table.py" not in text and "During handling" not in text
    sentence = next(line for line in lines if "unknown source option" in line)
    assert sentence.startswith("rocketspark.errors.OptionError: unknown source option")


def test_a_refused_sink_option_is_as_short(spark: Any, tmp_path: Path) -> None:
    rows = spark.createDataFrame([("x",)], "body string")
    text = failure_of(
        lambda: (
            rows.write.format("rocketmq")
            .mode("append")
            .option("nameserver", "127.0.0.1:9876")
            .option("topic", "t")
            .option("kafka.bootstrap.servers", "h:9092")
            .save()
        )
    )
    assert 'unknown sink option "kafka.bootstrap.servers", a Kafka connector option: use "nameserver"' in text
    assert len(text) < 500, text
