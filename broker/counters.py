"""What a broker counts, read out in one place: ``to_wire`` is GET_COUNTERS' answer (and the
broker's runtime info reads its store figures from it), per-topic messages in and out with it."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from broker.store.scrub import ScrubStats
from broker.store.stats import StoreStats
from rocketspark.remoting.admission import InflightBudget


class BrokerCounters:
    """The broker's counters, given the objects that keep them: requests by code and the
    in-flight budget (its dispatcher's), the store's and the scrubber's statistics, and two
    readings: the long polls waiting, and the duplicates its idempotent producers' table
    dropped."""

    def __init__(
        self,
        requests: Mapping[int, int],
        budget: InflightBudget,
        store: StoreStats,
        scrub: ScrubStats,
        *,
        long_polls_waiting: Callable[[], int],
        duplicates_dropped: Callable[[], int],
        trace_dropped: Callable[[], int],
    ) -> None:
        self.requests = requests
        self.budget = budget
        self.store = store
        self.scrub = scrub
        self.long_polls_waiting = long_polls_waiting
        self.duplicates_dropped = duplicates_dropped
        self.trace_dropped = trace_dropped

    def to_wire(self) -> dict[str, Any]:
        stats, scrub, budget = self.store, self.scrub, self.budget
        return {
            "requests": {str(code): n for code, n in sorted(self.requests.items())},
            "messagesStored": stats.messages_put,
            "bytesStored": stats.bytes_put,
            "messagesRead": stats.messages_got,
            "segmentsDeleted": stats.segments_deleted,
            "indexMismatches": stats.index_mismatches,
            "queuesRebuilt": stats.queues_rebuilt,
            "scrubPasses": scrub.passes,
            "scrubSegments": scrub.segments,
            "scrubBytes": scrub.bytes,
            "scrubDamagedSegments": scrub.damaged_segments,
            "scrubDamage": scrub.damage,
            "longPollWaiting": self.long_polls_waiting(),
            "duplicatesDropped": self.duplicates_dropped(),
            "traceEventsDropped": self.trace_dropped(),  # message trace events lost (broker.trace)
            "systemBusy": budget.refused,  # requests refused: too many bytes in flight
            "inflightRequestBytes": budget.inflight_bytes,
            "inflightRequestBytesPeak": budget.peak_bytes,
            "topics": self._topics(),
            "time": int(time.time() * 1000),
        }

    def _topics(self) -> dict[str, dict[str, int]]:
        """Per topic, messages stored and messages read by any consumer (pull, Spark, 4.x pull,
        the v2 endpoint's reads for pop): the figures ``rocketmq_messages_in`` and
        ``rocketmq_messages_out`` count, from the store's one tally."""
        topics = list(self.store.topics.items())  # one step: the store's threads add topics
        return {t: {"messagesIn": s.messages_in, "messagesOut": s.messages_out} for t, s in sorted(topics)}
