"""Option parsing of the rocketmq data source, without Spark: what is checked when, the
hints for misspelt names, and the sink options that configure its producer."""

from __future__ import annotations

import pytest

from rocketspark.errors import OptionError
from rocketspark.spark import sink
from rocketspark.spark.options import parse_reader, parse_writer

NS = "127.0.0.1:9876"


def test_options_that_need_the_mode_are_checked_only_once_the_mode_is_known() -> None:
    batch_only = {"nameserver": NS, "topic": "t", "endingTimestamp": "1700000000000"}
    stream_only = {"nameserver": NS, "topic": "t", "maxOffsetsPerTrigger": "10"}
    # schema() parses before Spark says which mode the read is in: both must pass there
    assert parse_reader(batch_only, streaming=None).ending_timestamp == 1700000000000
    assert parse_reader(stream_only, streaming=None).max_offsets_per_trigger == 10
    assert parse_reader(batch_only, streaming=False).ending_timestamp == 1700000000000
    with pytest.raises(OptionError, match="only apply to batch reads"):
        parse_reader(batch_only, streaming=True)
    with pytest.raises(OptionError, match="only applies to streaming reads"):
        parse_reader(stream_only, streaming=False)


def test_batch_max_bytes_must_fit_in_one_frame_a_broker_takes() -> None:
    with pytest.raises(OptionError, match='option "batchMaxBytes" must be at most 134217728'):
        parse_writer({"nameserver": NS, "batchMaxBytes": str(1 << 30)})


def test_send_options_configure_the_sink_producer() -> None:
    """What sendTimeoutMs, retryTimes and batchMaxBytes do is the Producer's (tested with it);
    here: they reach the producer each worker process keeps per configuration."""
    options = parse_writer({"nameserver": NS, "sendTimeoutMs": "1234", "retryTimes": "0", "batchMaxBytes": "2048"})
    producer = sink.producer_for(options)
    try:
        assert (producer.timeout_ms, producer.retry_times_when_send_failed, producer.batch_max_bytes) == (1234, 0, 2048)
        assert sink.producer_for(options) is producer
    finally:
        producer.close()
    replacement = sink.producer_for(options)  # a closed producer is not handed to the next task
    try:
        assert replacement is not producer and not replacement.closed
    finally:
        replacement.close()


def test_a_misspelt_option_is_answered_with_the_name_as_written_in_the_docs() -> None:
    with pytest.raises(OptionError, match='unknown source option "maxoffsetpertrigger"; did you mean '):
        parse_reader({"nameserver": NS, "topic": "t", "maxoffsetpertrigger": "1"}, streaming=True)
    with pytest.raises(OptionError, match='did you mean "batchMaxBytes"'):
        parse_writer({"nameserver": NS, "batchmaxbyte": "1"})


def test_the_sink_takes_the_options_spark_sets_itself_and_still_refuses_a_typo() -> None:
    # as Spark's DataStreamWriter hands them over (lower-cased) for a named query, and as the
    # declarative pipelines' engine starts every flow that writes to a sink
    spark_set = {
        "queryname": "audit_orders",
        "checkpointlocation": "file:/tmp/storage/_checkpoints/audit_orders",
        "path": "/tmp/out",
        "asyncprogresstrackingenabled": "false",
        "asyncprogresstrackingcheckpointintervalms": "0",
    }
    assert parse_writer({"nameserver": NS, "topic": "t", **spark_set}).topic == "t"
    with pytest.raises(OptionError, match='unknown sink option "nameservr"; did you mean "nameserver"'):
        parse_writer({"nameservr": NS, "topic": "t", **spark_set})
    with pytest.raises(OptionError) as refused:
        parse_writer({"nameserver": NS, "topic": "t", "compression": "zstd"})
    assert "known options: nameserver, topic, tag" in str(refused.value)
    assert "queryName" not in str(refused.value)  # Spark's own are no advice to a user


def test_the_security_options_come_in_pairs_read_their_files_at_once_and_hide_the_secret() -> None:
    given = {"nameserver": NS, "topic": "t", "accessKey": "etl", "secretKey": "etl-secret", "tls": "true"}
    options = parse_reader(given, streaming=True)
    assert options.connection.client_kwargs() == {"access_key": "etl", "secret_key": "etl-secret", "tls": True}
    assert "etl-secret" not in repr(options) and "etl-secret" not in repr(parse_writer(given))
    with pytest.raises(OptionError, match='options "accessKey" and "secretKey": set both'):
        parse_writer({"nameserver": NS, "topic": "t", "accessKey": "etl"})
    with pytest.raises(OptionError, match=r"TLS options .*tls_ca_file '/nowhere/ca\.pem' cannot be read"):
        parse_reader({"nameserver": NS, "topic": "t", "tlsCaFile": "/nowhere/ca.pem"}, streaming=True)
    with pytest.raises(OptionError, match='unknown source option "secretkye"; did you mean "secretKey"'):
        parse_reader({"nameserver": NS, "topic": "t", "secretKye": "x"}, streaming=True)


def test_the_sql_option_is_compiled_at_query_start_and_excludes_tags() -> None:
    ok = parse_reader({"nameserver": NS, "topic": "t", "sql": "amount > 100 AND TAGS IN ('a')"}, streaming=True)
    assert ok.sql == "amount > 100 AND TAGS IN ('a')" and ok.tags is None
    with pytest.raises(OptionError, match=r'option "sql": .*at line 1, column 9 \(character 8\)'):
        parse_reader({"nameserver": NS, "topic": "t", "sql": "amount >"}, streaming=True)
    with pytest.raises(OptionError, match='set the option "tags" or the option "sql", not both'):
        parse_reader({"nameserver": NS, "topic": "t", "sql": "a = 1", "tags": "x"}, streaming=True)


def test_kafka_connector_options_are_answered_with_ours() -> None:
    base = {"nameserver": "127.0.0.1:9876", "topic": "t"}
    with pytest.raises(OptionError, match=r'"subscribepattern" \(Kafka\'s "subscribePattern"\): use "topicPattern"'):
        parse_reader({**base, "subscribepattern": "a.*"}, streaming=True)
    with pytest.raises(OptionError, match=r'"kafka.group.id", a Kafka connector option: not needed'):
        parse_reader({**base, "kafka.group.id": "g"}, streaming=True)
    with pytest.raises(OptionError, match=r'"kafka.ssl.truststore.location", a Kafka client setting: use "tls"'):
        parse_reader({**base, "kafka.ssl.truststore.location": "/x"}, streaming=True)
    with pytest.raises(OptionError, match=r'unknown sink option "kafka.linger.ms", a Kafka client setting: not needed'):
        parse_writer({**base, "kafka.linger.ms": "5"})
