"""Options of ``format("rocketmq")``: one table, parsed once into frozen objects.

Each option is declared once, as an :class:`Option`: its name as users write it, how its text
becomes a value, its default, the bounds a number keeps and the line the docs give it. The
parsers, their error messages and the docs' option reference (:func:`reference`) are all
made from the tables ``READER`` and ``WRITER`` (:mod:`rocketspark.spark.option_table`).

Spark hands options over as a case-insensitive map of strings. Every value is checked here,
when the query starts, and a bad one fails with one sentence naming the option and the fix,
e.g. ``option "startingOffsets" is not valid JSON (...); use "earliest", "latest" or
{"orders": {"0": 42}}``. Option names follow Spark's Kafka connector where a Kafka user would
look for them (``startingOffsets``, ``maxOffsetsPerTrigger``, ``failOnDataLoss``...).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from rocketspark.client.producer import BATCH_MAX_BYTES, RETRY_TIMES_WHEN_SEND_FAILED
from rocketspark.errors import OptionError
from rocketspark.remoting.admission import MAX_REQUEST_BYTES
from rocketspark.security.client_side import FIELDS
from rocketspark.spark import option_values as read
from rocketspark.spark.connection import Connection
from rocketspark.spark.option_table import Option, Within, given, known
from rocketspark.spark.option_values import OffsetSpec

# A send request must fit in one frame a broker takes, with room to spare.
MAX_BATCH_BYTES: Final = MAX_REQUEST_BYTES // 2
_SECURITY_DOCS: Final = {
    "access_key": "the user the query signs as, on a cluster with security on",
    "secret_key": "that user's secret (never logged, never in the checkpoint)",
    "tls": "TLS to the cluster, on or off",
    "tls_ca_file": "the CA the servers' certificates are signed by",
    "tls_cert_file": "a client certificate, for mutual TLS",
    "tls_key_file": "its private key",
}
SECURITY: Final[tuple[Option[Any], ...]] = tuple(
    Option(
        f.option,
        read.boolean if f.keyword == "tls" else read.text,
        None,
        doc=_SECURITY_DOCS[f.keyword],
        shown="the environment",
    )
    for f in FIELDS
)
NAMESERVER: Final[Option[tuple[str, ...]]] = Option(
    "nameserver",
    read.nameservers,
    (),
    field="nameservers",
    doc="`host:port[,host:port]`",
    required='.option("nameserver", "127.0.0.1:9876")',
)
_WHICH_TOPICS = "one of `topic`, `topicPattern`, `assign`"
_AT_LEAST_1, _AT_LEAST_0 = Within(1), Within(0)

READER: Final[tuple[Option[Any], ...]] = (
    NAMESERVER,
    Option("topic", read.topic_list, (), field="topics", shown=_WHICH_TOPICS, doc="the topics read, a comma list"),
    Option(
        "topicPattern",
        read.pattern,
        None,
        field="topic_pattern",
        shown=_WHICH_TOPICS,
        doc="every topic whose whole name matches this regular expression (the list is read again every second)",
    ),
    Option(
        "assign",
        read.assignment,
        None,
        field="assign",
        shown=_WHICH_TOPICS,
        doc='the logical queues read, `{"orders": [0, 1]}`',
    ),
    Option(
        "startingOffsets",
        read.offsets,
        None,
        field="starting",
        shown="`latest` (stream), `earliest` (batch)",
        doc='`earliest`, `latest`, or `{"orders": {"0": 42, "1": -2}}` (-2 earliest, -1 latest); '
        "not `latest` in a batch read",
    ),
    Option(
        "startingTimestamp",
        read.whole,
        None,
        _AT_LEAST_0,
        field="starting_timestamp",
        doc="start every queue at the first message stored at or after this time (ms); wins over the two below",
    ),
    Option(
        "startingOffsetsByTimestamp",
        read.timestamps,
        None,
        field="starting_by_timestamp",
        doc='the same per queue, `{"orders": {"0": 1700000000000}}`; wins over `startingOffsets`',
    ),
    Option(
        "startingOffsetsByTimestampStrategy",
        read.timestamp_strategy,
        "error",
        field="timestamp_strategy",
        doc="when a queue has no message stored at or after the time: fail (`error`) or start at `latest`",
    ),
    Option(
        "endingOffsets",
        read.offsets,
        "latest",
        field="ending",
        doc="where a batch read ends, as `startingOffsets`; batch reads only",
    ),
    Option(
        "endingTimestamp",
        read.whole,
        None,
        _AT_LEAST_0,
        field="ending_timestamp",
        doc="end a batch read at the first message stored at or after this time (ms); batch reads only",
    ),
    Option(
        "failOnDataLoss",
        read.boolean,
        True,
        field="fail_on_data_loss",
        doc="offsets deleted before they were read fail the query, naming the queue and range; `false` skips "
        "exactly those",
    ),
    Option(
        "maxOffsetsPerTrigger",
        read.whole,
        None,
        _AT_LEAST_1,
        field="max_offsets_per_trigger",
        doc="cap of one micro-batch, shared among queues by backlog; honoured by `Trigger.AvailableNow`",
    ),
    Option(
        "minOffsetsPerTrigger",
        read.whole,
        None,
        _AT_LEAST_1,
        field="min_offsets_per_trigger",
        doc="wait for this many new offsets before a micro-batch",
    ),
    Option(
        "maxTriggerDelay",
        read.duration_ms,
        15 * 60 * 1000,
        field="max_trigger_delay_ms",
        shown="`15m`",
        doc="but not longer than this (`500ms`, `30s`, `15m`, `1h`; with `minOffsetsPerTrigger` only)",
    ),
    Option(
        "minPartitions",
        read.whole,
        None,
        _AT_LEAST_1,
        field="min_partitions",
        doc="split queues (at segment boundaries first) into at least this many partitions",
    ),
    Option("tags", read.tags, None, field="tags", shown="all", doc="server-side tag filter, `TagA || TagB`"),
    Option(
        "sql",
        read.sql,
        None,
        field="sql",
        doc="server-side SQL92 filter over the messages' properties, `amount > 100 AND TAGS IN ('a')` (see "
        "Filters; not with `tags`); a bad expression fails the query at its start",
    ),
    Option("includeProperties", read.boolean, False, field="include_properties", doc="add the `properties` column"),
    Option(
        "consumerGroup",
        read.text,
        None,
        field="consumer_group",
        doc="also commit progress to this group, for lag dashboards (`rocketspark admin progress`); never used "
        "to decide where to read",
    ),
    Option(
        "pullTimeoutMs",
        read.whole,
        30_000,
        _AT_LEAST_1,
        field="pull_timeout_ms",
        doc="tuning: how long a pull (or a request of the driver) may take",
    ),
    Option(
        "pullBatchSize",
        read.whole,
        32_768,
        _AT_LEAST_1,
        field="pull_batch_size",
        doc="tuning: messages asked for by one pull",
    ),
    Option("verifyCrc", read.boolean, True, field="verify_crc", doc="tuning: check each record's CRC as it is read"),
    Option(
        "latestOffsetCacheMs",
        read.whole,
        100,
        _AT_LEAST_0,
        field="latest_offset_cache_ms",
        doc="tuning: how long the driver reuses the latest offsets it fetched",
    ),
    *SECURITY,
    Option("path", read.text, None),  # set by load(path); ignored
)

# What Spark's DataStreamWriter puts among a sink's options on its own: start(path) and
# save(path) set `path`, queryName() sets `queryName` (as Spark's declarative pipelines do for
# every flow, under the flow's name), and Spark itself reads `checkpointLocation` and the async
# progress tracking pair from the same map. The sink accepts and ignores them, so that only a
# name nobody sets is refused as a typo.
SET_BY_SPARK: Final[tuple[Option[Any], ...]] = tuple(
    Option(name, read.text, None)
    for name in (
        "path",
        "checkpointLocation",
        "queryName",
        "asyncProgressTrackingEnabled",
        "asyncProgressTrackingCheckpointIntervalMs",
    )
)

WRITER: Final[tuple[Option[Any], ...]] = (
    NAMESERVER,
    Option("topic", read.text, None, field="topic", doc="the topic written to (wins over a `topic` column)"),
    Option("tag", read.text, None, field="tag", doc="the tag of rows without a `tag` column"),
    Option("sendTimeoutMs", read.whole, 10_000, _AT_LEAST_1, field="send_timeout_ms", doc="how long one send may take"),
    Option(
        "retryTimes",
        read.whole,
        RETRY_TIMES_WHEN_SEND_FAILED,
        _AT_LEAST_0,
        field="retry_times",
        doc="how often a failed send is tried again",
    ),
    Option(
        "batchMaxBytes",
        read.whole,
        BATCH_MAX_BYTES,
        Within(1024, MAX_BATCH_BYTES, " (half the largest request a broker reads)"),
        field="batch_max_bytes",
        doc="the largest batch record one send carries",
    ),
    Option(
        "idempotent",
        read.boolean,
        True,
        field="idempotent",
        doc="a re-run micro-batch stores each message once (see below); `false`: a re-run sends them again",
    ),
    *SECURITY,
    *SET_BY_SPARK,
)


@dataclass(frozen=True, slots=True)
class ReaderOptions:
    """The source's options, parsed (``parse_reader``; the defaults are ``READER``'s)."""

    nameservers: tuple[str, ...]
    topics: tuple[str, ...]
    topic_pattern: str | None
    assign: dict[str, tuple[int, ...]] | None
    starting: OffsetSpec
    starting_timestamp: int | None
    starting_by_timestamp: dict[str, dict[int, int]] | None
    timestamp_strategy: str
    ending: OffsetSpec
    ending_timestamp: int | None
    fail_on_data_loss: bool
    max_offsets_per_trigger: int | None
    min_offsets_per_trigger: int | None
    max_trigger_delay_ms: int
    min_partitions: int | None
    tags: tuple[str, ...] | None
    sql: str | None  # an SQL92 filter expression over the messages' properties
    include_properties: bool
    consumer_group: str | None
    pull_timeout_ms: int
    pull_batch_size: int
    verify_crc: bool
    latest_offset_cache_ms: int
    connection: Connection


def _writer_default(name: str) -> Any:
    return next(o.default for o in WRITER if o.field == name)


@dataclass(frozen=True, slots=True)
class WriterOptions:
    """The sink's options, parsed (``parse_writer``; the defaults are ``WRITER``'s)."""

    nameservers: tuple[str, ...]
    topic: str | None = _writer_default("topic")
    tag: str | None = _writer_default("tag")
    send_timeout_ms: int = _writer_default("send_timeout_ms")
    retry_times: int = _writer_default("retry_times")
    batch_max_bytes: int = _writer_default("batch_max_bytes")
    idempotent: bool = _writer_default("idempotent")
    connection: Connection = field(default_factory=Connection)


def _fields(table: Sequence[Option[Any]], values: Mapping[str, Any]) -> dict[str, Any]:
    return {o.field: values[o.name] for o in table if o.field}


def parse_reader(options: Mapping[str, str], *, streaming: bool | None) -> ReaderOptions:
    """Check and parse source options; every problem names the option and the fix.

    ``streaming=None``: the mode is not known yet. Spark asks for the schema at ``load()``,
    before it says whether the read is ``spark.read`` or ``readStream``, so only the checks
    that hold in both modes run then; the reader parses again with the real mode.
    """
    options = known(options, READER, "source")
    selectors = [name for name in ("topic", "topicPattern", "assign") if given(options, name) is not None]
    if len(selectors) != 1:
        raise OptionError(
            'set exactly one of the options "topic", "topicPattern" or "assign"'
            + (f" (got {', '.join(selectors)})" if selectors else "")
        )
    values = {o.name: o.value(options) for o in READER}
    _check_together(options, values)
    _check_mode(options, streaming)
    fields = _fields(READER, values)
    fields["starting"] = fields["starting"] or ("earliest" if streaming is False else "latest")
    return ReaderOptions(**fields, connection=Connection.of(values))


def _check_together(options: Mapping[str, str], values: Mapping[str, Any]) -> None:
    """The rules between options that hold in both modes."""
    if values["tags"] and values["sql"] is not None:
        raise OptionError('set the option "tags" or the option "sql", not both (TAGS is a name sql can test)')
    least, most = values["minOffsetsPerTrigger"], values["maxOffsetsPerTrigger"]
    if given(options, "maxTriggerDelay") is not None and least is None:
        raise OptionError('option "maxTriggerDelay" only applies with "minOffsetsPerTrigger"; set both or neither')
    if most is not None and least is not None and least > most:
        raise OptionError('option "minOffsetsPerTrigger" cannot be larger than "maxOffsetsPerTrigger"')


def _check_mode(options: Mapping[str, str], streaming: bool | None) -> None:
    """The options of one mode only, refused in the other (nothing while it is not known)."""
    if streaming is False:
        for name in ("maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay"):
            if given(options, name) is not None:
                raise OptionError(f'option "{name}" only applies to streaming reads (readStream), not batch reads')
        if (given(options, "startingOffsets") or "").lower() == "latest":
            raise OptionError('option "startingOffsets" cannot be "latest" here; use "earliest" or JSON offsets')
    elif streaming and (given(options, "endingOffsets") is not None or given(options, "endingTimestamp") is not None):
        raise OptionError('options "endingOffsets" and "endingTimestamp" only apply to batch reads (spark.read)')


def parse_writer(options: Mapping[str, str]) -> WriterOptions:
    """Check and parse sink options; every problem names the option and the fix."""
    options = known(options, WRITER, "sink")
    values = {o.name: o.value(options) for o in WRITER}
    return WriterOptions(**_fields(WRITER, values), connection=Connection.of(values))
