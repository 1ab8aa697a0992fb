"""Helpers for Spark tests: run a streaming query to the end of what is there, replay its last
micro-batch."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def reader(spark: Any, nameserver: str, topic: str, **options: Any) -> Any:
    stream = spark.readStream.format("rocketmq").option("nameserver", nameserver).option("topic", topic)
    for key, value in options.items():
        stream = stream.option(key, str(value))
    return stream.load()


def run_available_now(
    df: Any,
    checkpoint: str,
    *,
    fmt: str = "memory",
    name: str | None = None,
    path: str | None = None,
    timeout: float = 180,
    **options: Any,
) -> Any:
    """Start ``df`` with Trigger.AvailableNow, wait for it to finish, return the query."""
    writer = df.writeStream.format(fmt).trigger(availableNow=True).option("checkpointLocation", checkpoint)
    for key, value in options.items():
        writer = writer.option(key, str(value))
    if name:
        writer = writer.queryName(name)
    query = writer.start(path) if path else writer.start()
    finished = query.awaitTermination(timeout)
    if query.exception() is not None:
        raise query.exception()
    assert finished, "the query did not finish in time"
    return query


def forget_last_commit(checkpoint: Path) -> tuple[int, str]:
    """Make Spark re-run the last micro-batch on the next start, as if the driver had died
    before recording its commit; return the batch id and the offsets logged for it."""
    batches = sorted(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())
    last = batches[-1]
    offsets = (checkpoint / "offsets" / str(last)).read_text().splitlines()[-1]
    (checkpoint / "commits" / str(last)).unlink()
    (checkpoint / "commits" / f".{last}.crc").unlink(missing_ok=True)
    return last, offsets
