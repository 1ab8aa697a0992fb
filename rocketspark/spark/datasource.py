"""``format("rocketmq")``: the Spark data source of rocketspark.

After ``pip install rocketspark`` the short name works in any new SparkSession, with no
register call: pyspark discovers the top-level module ``pyspark_rocketmq``, which exposes
this class as ``DefaultSource``. That discovery needs Spark's Python workers to run the
interpreter rocketspark is installed in (set ``PYSPARK_PYTHON`` to it); where discovery is
off, call :func:`register`, which also checks a packaged job's settings (``package-job``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from rocketspark.errors import ConfigError, OptionError
from rocketspark.spark.executor_imports import Guarded
from rocketspark.spark.options import parse_reader, parse_writer
from rocketspark.spark.schema import source_schema

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

T = TypeVar("T")


class RocketMQDataSource(Guarded, DataSource):
    """Read and write rocketspark topics from Spark, streaming or batch.

    Examples
    --------
    Stream a topic into parquet, exactly once across restarts and broker remaps:

    >>> events = (spark.readStream.format("rocketmq")
    ...     .option("nameserver", "127.0.0.1:9876")
    ...     .option("topic", "orders")
    ...     .option("startingOffsets", "earliest")
    ...     .option("maxOffsetsPerTrigger", 100000)
    ...     .load())
    >>> query = (events.selectExpr("queueId", "queueOffset", "CAST(body AS STRING) AS json")
    ...     .writeStream.format("parquet")
    ...     .option("checkpointLocation", "/tmp/cp")
    ...     .start("/tmp/out"))

    Write results to another topic (columns body/value, topic, tag, keys, properties,
    queueId, shardingKey):

    >>> (counts.selectExpr("CAST(customer AS STRING) AS shardingKey", "to_json(struct(*)) AS body")
    ...     .writeStream.format("rocketmq")
    ...     .option("nameserver", "127.0.0.1:9876").option("topic", "order-totals")
    ...     .option("checkpointLocation", "/tmp/cp2").outputMode("update").start())

    A bounded batch read:

    >>> spark.read.format("rocketmq").option("nameserver", "127.0.0.1:9876") \\
    ...     .option("topic", "orders").option("endingOffsets", '{"orders": {"0": 100}}').load()

    Source columns: topic, queueId (logical queue), queueOffset (logical offset), msgId (the
    id its send returned, RocketMQ's UNIQ_KEY: what ``rocketspark admin query-msg --id``
    finds), tag, keys, body, bornTimestamp, storeTimestamp, brokerName (the segment's broker),
    priority (a RocketMQ 5.4 priority message's, else null) and, with ``includeProperties``,
    properties. One Spark partition per logical queue.
    """

    @classmethod
    def name(cls) -> str:
        return "rocketmq"

    def schema(self) -> StructType:
        # Options are checked here, at load(): a bad one fails before the query starts. Spark
        # has not said yet whether this is spark.read or readStream, so the checks that depend
        # on it wait for reader() / streamReader().
        options = _refused_or(lambda: parse_reader(self.options, streaming=None))
        if isinstance(options, OptionError):
            raise options
        return source_schema(options.include_properties)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from rocketspark.spark.source import RocketMQStreamReader

        options = _refused_or(lambda: parse_reader(self.options, streaming=True))
        if isinstance(options, OptionError):
            raise options
        return RocketMQStreamReader(options)

    def reader(self, schema: StructType) -> DataSourceReader:
        from rocketspark.spark.pushdown import spark_pushes_filters
        from rocketspark.spark.source import RocketMQBatchReader, RocketMQFilteringReader

        options = _refused_or(lambda: parse_reader(self.options, streaming=False))
        if isinstance(options, OptionError):
            raise options
        if spark_pushes_filters():
            return RocketMQFilteringReader(options)
        return RocketMQBatchReader(options)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from rocketspark.spark.sink import RocketMQStreamWriter

        options = _refused_or(lambda: parse_writer(self.options))
        if isinstance(options, OptionError):
            raise options
        return RocketMQStreamWriter(options, schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from rocketspark.spark.sink import RocketMQBatchWriter

        options = _refused_or(lambda: parse_writer(self.options))
        if isinstance(options, OptionError):
            raise options
        return RocketMQBatchWriter(options, schema)


def _refused_or(parse: Callable[[], T]) -> T | OptionError:
    """The parsed options, or the error refusing them, returned for the method Spark called to
    raise. Spark prints a refused option as "[PYTHON_DATA_SOURCE_ERROR] ...: Traceback (most
    recent call last):" and the worker's traceback, the sentence on its last line; the first
    line is Spark's whatever is raised (a PySparkValueError with an error class too), and
    Spark's own frames are left out (spark.sql.execution.pyspark.udf.simplifiedTraceback
    .enabled), but not ours. Raised where Spark called us, afresh, the error has one frame above
    the sentence, not the parser's dozen: about 350 characters in all instead of 1.5 KB."""
    try:
        return parse()
    except OptionError as error:
        error.__cause__, error.__suppress_context__ = None, True
        return error.with_traceback(None)


def register(spark: SparkSession) -> None:
    """Register ``format("rocketmq")``: for a session where automatic discovery is off, and for
    a packaged job (``rocketspark package-job``), whose executors' interpreter is the shipped
    archive. It checks first that the interpreter spark-submit was told to run is one an
    archive of the job provides: a mistake is reported here, naming the option to fix, not as
    a failed executor later. It leaves ``spark.sql.python.filterPushdown.enabled`` as the
    session has it: with pyspark 4.1-4.3 that setting can make a reused DataFrame read too few
    rows (docs/spark/pushdown.md), so turning it on is the user's choice."""
    try:
        conf = dict(spark.sparkContext.getConf().getAll())
    except AttributeError:  # a Spark Connect session has no SparkContext: its server launches the workers
        conf = {}
    check_packaged(conf)
    spark.dataSource.register(RocketMQDataSource)


def check_submit() -> None:
    """Check spark-submit's settings for a packaged job before the SparkSession exists: Spark
    starts a Python worker (``spark.pyspark.python``) as the session starts, so a missing
    archive is best named before that. Run in the driver (it reads spark-submit's settings)."""
    from pyspark import SparkConf, SparkContext

    SparkContext._ensure_initialized()  # the gateway spark-submit started: its settings
    check_packaged(dict(SparkConf().getAll()))


def check_packaged(conf: dict[str, str]) -> None:
    """``spark.pyspark.python`` of the form ``./<dir>/bin/python`` needs an archive unpacked as
    ``<dir>`` (``--archives job-env.tar.gz#<dir>``)."""
    python = conf.get("spark.pyspark.python", "")
    if not python.startswith("./"):
        return
    directory = python[2:].split("/", 1)[0]
    listed = ",".join(conf.get(key, "") for key in ("spark.archives", "spark.yarn.dist.archives"))
    archives = [a.strip() for a in listed.split(",") if a.strip()]
    if not any("#" in a and a.rsplit("#", 1)[-1] == directory for a in archives):
        raise ConfigError(
            f"spark.pyspark.python is {python}, but no archive is unpacked as '{directory}' (spark.archives: "
            f"{', '.join(archives) or 'none'}); pass the job's archive to spark-submit as "
            f"--archives job-env.tar.gz#{directory} (make it with `rocketspark package-job job.py -o job-env.tar.gz`)"
        )
