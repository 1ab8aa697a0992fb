"""The console's throughput chart: messages in per second, cluster-wide, per broker and per
topic, sampled every few seconds from the brokers' cumulative counters (``broker_counters``:
``messagesStored`` per broker, ``topics`` -> ``messagesIn``/``messagesOut`` per topic)."""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from typing import Any, Protocol

from rocketspark.errors import RocketSparkError

log = logging.getLogger(__name__)

WATCHED_S = 60.0


class Counters(Protocol):
    """What the throughput sampler reads: the brokers (name -> address) and each one's
    counters by its address (one request a broker, no name look-up)."""

    def brokers(self) -> dict[str, str]: ...

    def counters_at(self, address: str) -> dict[str, Any]: ...


def topic_totals(counters: dict[str, dict[str, Any]]) -> dict[str, tuple[int, int]]:
    """Per topic, messages in and out summed over the brokers' counters (broker -> counters)."""
    totals: dict[str, tuple[int, int]] = {}
    for figures in counters.values():
        for topic, counts in (figures.get("topics") or {}).items():
            was_in, was_out = totals.get(topic, (0, 0))
            totals[topic] = (was_in + int(counts.get("messagesIn", 0)), was_out + int(counts.get("messagesOut", 0)))
    return totals


def per_second(before: dict[str, int], after: dict[str, int], seconds: float) -> dict[str, float]:
    """The rate of each counter in both readings; a counter that went down (a restarted broker)
    counts as 0, never as a negative rate."""
    if seconds <= 0:
        return {}
    return {name: max(0.0, (after[name] - before[name]) / seconds) for name in after if name in before}


class Throughput:
    """Messages per second, cluster-wide (``total``), per broker (``brokers``, stored) and per
    topic (``topics``: in and out), sampled every ``interval_s``; the last ``keep`` samples (a
    5-minute chart by default). It samples only while someone looks (the chart was asked for
    within ``WATCHED_S``): an unwatched console costs the cluster nothing."""

    def __init__(self, admin: Counters, interval_s: float = 2.0, keep: int = 150) -> None:
        self.admin = admin
        self.interval_s = interval_s
        self.samples: deque[dict[str, Any]] = deque(maxlen=keep)
        self._last: tuple[float, dict[str, int], dict[str, int], dict[str, int]] | None = None
        self._watched_until = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="console-throughput", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            if time.monotonic() > self._watched_until:
                self._last = None  # a rate across an unwatched stretch would mislead
                continue
            try:
                self.sample()
            except RocketSparkError as exc:  # a broker away for a moment: the chart has a gap
                log.debug("console: throughput sample failed: %s", exc)
            except Exception:
                log.exception("console: throughput sample failed")

    def sample(self, now: float | None = None) -> None:
        """Read every broker's counters; from the second reading on, append a sample."""
        now = time.time() if now is None else now
        counters = {name: self.admin.counters_at(address) for name, address in sorted(self.admin.brokers().items())}
        stored = {name: int(c["messagesStored"]) for name, c in counters.items()}
        topics = topic_totals(counters)
        ins = {t: pair[0] for t, pair in topics.items()}
        outs = {t: pair[1] for t, pair in topics.items()}
        before, self._last = self._last, (now, stored, ins, outs)
        if before is None:
            return
        seconds = now - before[0]
        brokers = per_second(before[1], stored, seconds)
        if brokers:
            rates_in, rates_out = per_second(before[2], ins, seconds), per_second(before[3], outs, seconds)
            by_topic = {t: {"in": rates_in[t], "out": rates_out.get(t, 0.0)} for t in rates_in}
            self.samples.append(
                {"t": int(now * 1000), "total": sum(brokers.values()), "brokers": brokers, "topics": by_topic}
            )

    def series(self) -> list[dict[str, Any]]:
        self._watched_until = time.monotonic() + WATCHED_S
        return list(self.samples)

    def topic_rates(self, topic: str) -> dict[str, float] | None:
        """The topic's latest in/out rates (None before two samples); counts as a look."""
        self._watched_until = time.monotonic() + WATCHED_S
        for sample in reversed(self.samples):
            if topic in sample["topics"]:
                return dict(sample["topics"][topic])
        return None
