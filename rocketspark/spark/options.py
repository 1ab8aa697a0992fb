"""Options of ``format("rocketmq")``, parsed once into frozen objects.

Spark hands options over as a case-insensitive map of strings. Every value is checked here,
when the query starts, and a bad one fails with one sentence naming the option and the fix,
e.g. ``option "startingOffsets" is not valid JSON (...); use "earliest", "latest" or
{"orders": {"0": 42}}``. Option names follow Spark's Kafka connector where a Kafka user would
look for them (``startingOffsets``, ``maxOffsetsPerTrigger``, ``failOnDataLoss``...).
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from rocketspark.client.nameservers import resolve_nameservers
from rocketspark.client.pulling import parse_tags
from rocketspark.errors import ConfigError, InvalidAddressError, NoNameServerError, OptionError
from rocketspark.filtering import IllegalFilterExpressionError, compile_cached
from rocketspark.remoting.admission import MAX_REQUEST_BYTES
from rocketspark.security.client_side import FIELDS, ClientSecurity, SecurityKwargs

EARLIEST = -2  # in JSON offsets, as in Kafka
LATEST = -1


# The option names, as users write them (Spark hands them over lower-cased).
SECURITY_OPTIONS = tuple(f.option for f in FIELDS)
READER_OPTIONS = (
    "nameserver",
    "topic",
    "topicPattern",
    "assign",
    "startingOffsets",
    "startingTimestamp",
    "startingOffsetsByTimestamp",
    "startingOffsetsByTimestampStrategy",
    "endingOffsets",
    "endingTimestamp",
    "failOnDataLoss",
    "maxOffsetsPerTrigger",
    "minOffsetsPerTrigger",
    "maxTriggerDelay",
    "minPartitions",
    "tags",
    "sql",
    "includeProperties",
    "consumerGroup",
    "pullTimeoutMs",
    "pullBatchSize",
    "verifyCrc",
    "latestOffsetCacheMs",
    *SECURITY_OPTIONS,
    "path",  # set by load(path); ignored
)
WRITER_OPTIONS = (
    "nameserver",
    "topic",
    "tag",
    "sendTimeoutMs",
    "retryTimes",
    "batchMaxBytes",
    "idempotent",
    *SECURITY_OPTIONS,
    "path",  # set by save(path); ignored
    "checkpointLocation",  # set by Spark
)


def _check_known(options: Mapping[str, str], known: tuple[str, ...], kind: str) -> None:
    names = {name.lower(): name for name in known}
    for key in options:
        if key.lower() not in names:
            close = difflib.get_close_matches(key.lower(), list(names), n=1)
            hint = f'; did you mean "{names[close[0]]}"?' if close else f"; known options: {', '.join(known)}"
            raise OptionError(f'unknown {kind} option "{key}"{hint}')


def _get(options: Mapping[str, str], name: str) -> str | None:
    value = options.get(name.lower())
    return None if value is None or str(value).strip() == "" else str(value).strip()


def _int(options: Mapping[str, str], name: str, default: int | None = None, minimum: int = 0) -> int | None:
    raw = _get(options, name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise OptionError(f'option "{name}" must be a whole number, not "{raw}"') from None
    if value < minimum:
        raise OptionError(f'option "{name}" must be at least {minimum}, not {value}')
    return value


def _bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    raw = _get(options, name)
    if raw is None:
        return default
    if raw.lower() in ("true", "1", "yes"):
        return True
    if raw.lower() in ("false", "0", "no"):
        return False
    raise OptionError(f'option "{name}" must be true or false, not "{raw}"')


_DURATION = re.compile(r"^(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?$")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, None: 1}


def _duration_ms(options: Mapping[str, str], name: str, default: int) -> int:
    raw = _get(options, name)
    if raw is None:
        return default
    match = _DURATION.match(raw.lower())
    if not match:
        raise OptionError(f'option "{name}" must be a duration like 500ms, 30s, 15m or 1h, not "{raw}"')
    return int(float(match.group(1)) * _UNIT_MS[match.group(2)])


def _json(options: Mapping[str, str], name: str, example: str) -> Any:
    raw = _get(options, name)
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise OptionError(f'option "{name}" is not valid JSON ({exc}); use {example}') from None


def _nameservers(options: Mapping[str, str]) -> tuple[str, ...]:
    raw = _get(options, "nameserver")
    if raw is None:
        raise OptionError('option "nameserver" is required: .option("nameserver", "127.0.0.1:9876")')
    try:
        return tuple(resolve_nameservers(raw))
    except (InvalidAddressError, NoNameServerError) as exc:
        raise OptionError(f'option "nameserver": {exc.message}') from None


@dataclass(frozen=True, slots=True)
class Connection:
    """Who the query's clients are and how they connect: the user they sign as and their TLS.

    Each one not set falls back to the client's environment variable on the process that
    connects (ROCKETSPARK_ACCESS_KEY...). The secret never shows in a repr; Spark redacts the
    option ``secretKey`` (and ``accessKey``) in ``EXPLAIN`` and the UI by its default
    ``spark.redaction.regex``, and the source keeps none of it in the checkpoint."""

    access_key: str | None = None
    secret_key: str | None = field(default=None, repr=False)
    tls: bool | None = None
    tls_ca_file: str | None = None
    tls_cert_file: str | None = None
    tls_key_file: str | None = None

    def client_kwargs(self) -> SecurityKwargs:
        """The keywords a Producer, Consumer or Admin takes; only those set (None: the environment)."""
        given = {f.keyword: getattr(self, f.keyword) for f in FIELDS}
        return cast(SecurityKwargs, {k: v for k, v in given.items() if v is not None})

    def check(self) -> Connection:
        """Fail at the query's start, on the driver, for a half-given pair or an unreadable file."""
        if (self.access_key is None) != (self.secret_key is None):
            raise OptionError('options "accessKey" and "secretKey": set both (a user of the cluster), or neither')
        try:
            ClientSecurity.of(self.client_kwargs())
        except ConfigError as exc:
            raise OptionError(f"TLS options (tls, tlsCaFile, tlsCertFile, tlsKeyFile): {exc.message}") from None
        return self


def _connection(options: Mapping[str, str]) -> Connection:
    values: dict[str, Any] = {f.keyword: _get(options, f.option) for f in FIELDS}
    if values["tls"] is not None:
        values["tls"] = _bool(options, "tls", False)
    return Connection(**values).check()


OffsetSpec = str | dict[str, dict[int, int]]  # "earliest" / "latest" / {topic: {queue: offset}}


def _offsets(options: Mapping[str, str], name: str, default: str, allow_latest: bool = True) -> OffsetSpec:
    raw = _get(options, name)
    if raw is None:
        return default
    if raw.lower() in ("earliest", "latest"):
        if raw.lower() == "latest" and not allow_latest:
            raise OptionError(f'option "{name}" cannot be "latest" here; use "earliest" or JSON offsets')
        return raw.lower()
    parsed = _json(options, name, '"earliest", "latest" or {"orders": {"0": 42}}')
    return _queue_map(name, parsed, offsets=True)


def _queue_map(name: str, parsed: Any, *, offsets: bool) -> dict[str, dict[int, int]]:
    what = "an offset (-2 earliest, -1 latest)" if offsets else "a timestamp in ms"
    if not isinstance(parsed, dict) or not parsed:
        raise OptionError(f'option "{name}" must be a JSON object like {{"orders": {{"0": 42}}}}')
    out: dict[str, dict[int, int]] = {}
    for topic, queues in parsed.items():
        if not isinstance(queues, dict):
            raise OptionError(f'option "{name}": the value for topic "{topic}" must map queue ids to {what}')
        out[topic] = {}
        for queue, value in queues.items():
            if not str(queue).isdigit() or not isinstance(value, int) or isinstance(value, bool):
                raise OptionError(f'option "{name}": queue "{queue}" of "{topic}" must be a queue id mapped to {what}')
            if offsets and value < EARLIEST:
                raise OptionError(
                    f'option "{name}": offset {value} of {topic}/{queue} is not valid; use >= 0, -2 or -1'
                )
            out[topic][int(queue)] = value
    return out


@dataclass(frozen=True, slots=True)
class ReaderOptions:
    nameservers: tuple[str, ...]
    topics: tuple[str, ...] = ()
    topic_pattern: str | None = None
    assign: dict[str, tuple[int, ...]] | None = None
    starting: OffsetSpec = "latest"
    starting_timestamp: int | None = None
    starting_by_timestamp: dict[str, dict[int, int]] | None = None
    timestamp_strategy: str = "error"
    ending: OffsetSpec = "latest"
    ending_timestamp: int | None = None
    fail_on_data_loss: bool = True
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60 * 1000
    min_partitions: int | None = None
    tags: tuple[str, ...] | None = None
    sql: str | None = None  # an SQL92 filter expression over the messages' properties
    include_properties: bool = False
    consumer_group: str | None = None
    pull_timeout_ms: int = 30_000
    pull_batch_size: int = 32_768
    verify_crc: bool = True
    latest_offset_cache_ms: int = 100
    connection: Connection = Connection()


def _sql(options: Mapping[str, str], tags: list[str] | None) -> str | None:
    """The ``sql`` option, compiled now: a bad expression fails the query at its start."""
    sql = _get(options, "sql")
    if sql is None:
        return None
    if tags:
        raise OptionError('set the option "tags" or the option "sql", not both (TAGS is a name sql can test)')
    try:
        compile_cached(sql)
    except IllegalFilterExpressionError as exc:
        raise OptionError(f'option "sql": {exc.message}') from None
    return sql


def parse_reader(options: Mapping[str, str], *, streaming: bool | None) -> ReaderOptions:
    """Check and parse source options; every problem names the option and the fix.

    ``streaming=None``: the mode is not known yet. Spark asks for the schema at ``load()``,
    before it says whether the read is ``spark.read`` or ``readStream``, so only the checks
    that hold in both modes run then; the reader parses again with the real mode.
    """
    options = {str(k).lower(): v for k, v in options.items()}
    _check_known(options, READER_OPTIONS, "source")
    selectors = [name for name in ("topic", "topicPattern", "assign") if _get(options, name) is not None]
    if len(selectors) != 1:
        raise OptionError(
            'set exactly one of the options "topic", "topicPattern" or "assign"'
            + (f" (got {', '.join(selectors)})" if selectors else "")
        )
    topics: tuple[str, ...] = ()
    pattern = assign = None
    if selectors[0] == "topic":
        topics = tuple(t.strip() for t in (_get(options, "topic") or "").split(",") if t.strip())
    elif selectors[0] == "topicPattern":
        pattern = _get(options, "topicPattern")
        try:
            re.compile(pattern or "")
        except re.error as exc:
            raise OptionError(f'option "topicPattern" is not a valid regular expression: {exc}') from None
    else:
        parsed = _json(options, "assign", '{"orders": [0, 1, 2]}')
        if not isinstance(parsed, dict) or not all(
            isinstance(v, list) and all(isinstance(q, int) and q >= 0 for q in v) for v in parsed.values()
        ):
            raise OptionError('option "assign" must be JSON like {"orders": [0, 1, 2]} (logical queue ids)')
        assign = {t: tuple(sorted(set(v))) for t, v in parsed.items()}
    timestamp_strategy = (_get(options, "startingOffsetsByTimestampStrategy") or "error").lower()
    if timestamp_strategy not in ("error", "latest"):
        raise OptionError('option "startingOffsetsByTimestampStrategy" must be "error" or "latest"')
    by_time = _json(options, "startingOffsetsByTimestamp", '{"orders": {"0": 1700000000000}}')
    tags = parse_tags(_get(options, "tags"))
    sql = _sql(options, tags)
    min_trigger = _int(options, "minOffsetsPerTrigger", None, 1)
    if _get(options, "maxTriggerDelay") is not None and min_trigger is None:
        raise OptionError('option "maxTriggerDelay" only applies with "minOffsetsPerTrigger"; set both or neither')
    max_trigger = _int(options, "maxOffsetsPerTrigger", None, 1)
    if max_trigger is not None and min_trigger is not None and min_trigger > max_trigger:
        raise OptionError('option "minOffsetsPerTrigger" cannot be larger than "maxOffsetsPerTrigger"')
    if streaming is False:
        for name in ("maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay"):
            if _get(options, name) is not None:
                raise OptionError(f'option "{name}" only applies to streaming reads (readStream), not batch reads')
    elif streaming and (_get(options, "endingOffsets") is not None or _get(options, "endingTimestamp") is not None):
        raise OptionError('options "endingOffsets" and "endingTimestamp" only apply to batch reads (spark.read)')
    return ReaderOptions(
        nameservers=_nameservers(options),
        topics=topics,
        topic_pattern=pattern,
        assign=assign,
        starting=_offsets(
            options,
            "startingOffsets",
            "earliest" if streaming is False else "latest",
            allow_latest=streaming is not False,
        ),
        starting_timestamp=_int(options, "startingTimestamp", None, 0),
        starting_by_timestamp=_queue_map("startingOffsetsByTimestamp", by_time, offsets=False) if by_time else None,
        timestamp_strategy=timestamp_strategy,
        ending=_offsets(options, "endingOffsets", "latest"),
        ending_timestamp=_int(options, "endingTimestamp", None, 0),
        fail_on_data_loss=_bool(options, "failOnDataLoss", True),
        max_offsets_per_trigger=max_trigger,
        min_offsets_per_trigger=min_trigger,
        max_trigger_delay_ms=_duration_ms(options, "maxTriggerDelay", 15 * 60 * 1000),
        min_partitions=_int(options, "minPartitions", None, 1),
        tags=tuple(tags) if tags else None,
        sql=sql,
        include_properties=_bool(options, "includeProperties", False),
        consumer_group=_get(options, "consumerGroup"),
        pull_timeout_ms=_int(options, "pullTimeoutMs", 30_000, 1) or 30_000,
        pull_batch_size=_int(options, "pullBatchSize", 32_768, 1) or 32_768,
        verify_crc=_bool(options, "verifyCrc", True),
        latest_offset_cache_ms=_int(options, "latestOffsetCacheMs", 100, 0) or 0,
        connection=_connection(options),
    )


@dataclass(frozen=True, slots=True)
class WriterOptions:
    nameservers: tuple[str, ...]
    topic: str | None = None
    tag: str | None = None
    send_timeout_ms: int = 10_000
    retry_times: int = 2
    batch_max_bytes: int = 4 * 1024 * 1024
    idempotent: bool = True
    connection: Connection = Connection()


# A send request must fit in one frame a broker takes, with room to spare.
MAX_BATCH_BYTES = MAX_REQUEST_BYTES // 2


def parse_writer(options: Mapping[str, str]) -> WriterOptions:
    options = {str(k).lower(): v for k, v in options.items()}
    _check_known(options, WRITER_OPTIONS, "sink")
    batch_max_bytes = _int(options, "batchMaxBytes", 4 * 1024 * 1024, 1024) or 4 * 1024 * 1024
    if batch_max_bytes > MAX_BATCH_BYTES:
        raise OptionError(
            f'option "batchMaxBytes" must be at most {MAX_BATCH_BYTES} (a send request travels as one gRPC message), '
            f"not {batch_max_bytes}"
        )
    return WriterOptions(
        nameservers=_nameservers(options),
        topic=_get(options, "topic"),
        tag=_get(options, "tag"),
        send_timeout_ms=_int(options, "sendTimeoutMs", 10_000, 1) or 10_000,
        retry_times=_int(options, "retryTimes", 2, 0) or 0,
        batch_max_bytes=batch_max_bytes,
        idempotent=_bool(options, "idempotent", True),
        connection=_connection(options),
    )
