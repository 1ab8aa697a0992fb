"""Request latencies counted by bucket as requests are served, and read out when Prometheus
scrapes: the counts behind ``rocketmq_rpc_latency`` (:mod:`rocketspark.metrics.node` hands
them to ``prometheus_client``, which writes the exposition).

A ``prometheus_client`` histogram adds each value as Python, taking a lock for the sum and one
for the bucket: about 3 us of the 19-22 us a broker spends serving a one-message send (measured
in-process). Here the counts are a list of ints a series, and the module is compiled with the
request path (``setup.py``).

``Requests`` is what a server's dispatcher and RocketMQ 5 endpoint call as each request is
served (their ``RequestObserver``), compiled too: a call into plain Python from the request
path costs more than the counting.

Who writes and who reads: a server's event loop observes its requests (its RocketMQ 5 endpoint's
too), and a scrape reads from the metrics server's thread. An observation is a few stores with
no Python call among them, done whole under the GIL; a scrape adds each series' counts up in one
C call (``accumulate``), so the buckets it reports are cumulative and the last (+Inf) is the count.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Callable, Sequence
from itertools import accumulate

Key = tuple[str, int | str, int | str]  # (protocol, request code, response code), as observed


class Series:
    """One key's counts: per bucket (not cumulative, the last for values past every bound),
    the sum of the values, and when it was first observed (the exposition's ``_created``)."""

    __slots__ = ("counts", "created", "total")

    def __init__(self, buckets: int) -> None:
        self.counts = [0] * buckets
        self.total = 0.0
        self.created = time.time()


class Tally:
    """Observations by key into buckets of upper ``bounds`` (ascending; +Inf follows them)."""

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = [float(bound) for bound in bounds]
        self.series: dict[Key, Series] = {}

    def observe(self, key: Key, value: float) -> None:
        """Count ``value`` for ``key``, in the first bucket whose bound it does not exceed (as
        Prometheus's ``le`` says)."""
        series = self.series.get(key)
        if series is None:
            series = Series(len(self.bounds) + 1)
            self.series[key] = series
        series.counts[bisect_left(self.bounds, value)] += 1  # past every bound: the last, +Inf
        series.total += value

    def snapshot(self) -> list[tuple[Key, list[int], float, float]]:
        """Every series: its key, its cumulative bucket counts (the last is the count), its sum
        and when it was created."""
        return [
            (key, list(accumulate(series.counts)), series.total, series.created)
            for key, series in list(self.series.items())
        ]


class Requests:
    """Each request served: its latency, in milliseconds, into ``tally``; the seconds a long
    poll held it (kept out of its latency) to ``on_held`` (protocol, code, seconds)."""

    def __init__(self, tally: Tally, on_held: Callable[[str, int | str, float], None]) -> None:
        self.tally = tally
        self.on_held = on_held

    def observe_request(
        self, protocol: str, code: int | str, response_code: int | str, started: float, held: float = 0.0
    ) -> None:
        """A request served; ``started`` is its ``time.perf_counter()``."""
        self.tally.observe((protocol, code, response_code), max(0.0, time.perf_counter() - started - held) * 1000)
        if held > 0:
            self.on_held(protocol, code, held)
