"""Offsets behind latest, per query: what Kafka's connector reports as ``*OffsetsBehindLatest``.

Python sources cannot add custom metrics to a query's progress, but the progress carries each
source's ``endOffset`` (read so far) and ``latestOffset`` (reported by the source). This turns
them into a per-queue backlog. Logical offsets jump over the gap a remap leaves, so with a
``nameserver`` the backlog is counted in messages, segment by segment; without one it is the
plain offset difference.
"""

from __future__ import annotations

import json
from typing import Any, Unpack

from rocketspark.client.consumer import Consumer
from rocketspark.client.logical import count
from rocketspark.security.client_side import SecurityKwargs
from rocketspark.spark.catalog import Offsets, parse

Lag = dict[str, dict[int, int]]


def _offsets(value: Any) -> Offsets:
    """A progress report's offsets: JSON text, or already parsed."""
    return parse(json.loads(value) if isinstance(value, str) else value)


def offsets_behind_latest(
    query_or_progress: Any, nameserver: str | list[str] | None = None, **security: Unpack[SecurityKwargs]
) -> Lag:
    """Backlog per topic and logical queue of a streaming query's rocketmq source(s).

    Pass a ``StreamingQuery`` (its ``lastProgress`` is used) or one progress dict; ``security``:
    the client keywords (``access_key``, ``tls_ca_file``...) for a cluster with security on.
    """
    progress = getattr(query_or_progress, "lastProgress", query_or_progress)
    spans: list[tuple[str, int, int, int]] = []  # topic, queue, read up to, latest
    for source in (progress or {}).get("sources", []):
        end, latest = _offsets(source.get("endOffset")), _offsets(source.get("latestOffset"))
        for topic, queues in latest.items():
            for q, high in queues.items():
                spans.append((topic, q, end.get(topic, {}).get(q, 0), high))
    lag: Lag = {}
    if nameserver is None:
        for topic, q, low, high in spans:
            lag.setdefault(topic, {})[q] = max(0, high - low)
        return lag
    with Consumer(nameserver, **security) as consumer:
        views = {topic: consumer.queues(topic) for topic in {s[0] for s in spans}}
        for topic, q, low, high in spans:
            view = views[topic]
            lag.setdefault(topic, {})[q] = count(view[q], low, high) if q < len(view) and high > low else 0
    return lag


def total_lag(lag: Lag) -> int:
    return sum(v for queues in lag.values() for v in queues.values())
