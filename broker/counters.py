"""What a broker counts, read out in one place: ``to_wire`` is GET_COUNTERS' answer."""

from __future__ import annotations

import time
from typing import Any

from broker.dedupe import ProducerTable
from broker.longpoll import LongPollHub
from broker.store.store import MessageStore
from rocketspark.remoting.server import Dispatcher


class BrokerCounters:
    """The broker's counters, given the parts that keep them: requests by code and the
    in-flight budget (its dispatcher's), the store's and the scrubber's, the long polls
    waiting, and the duplicates its idempotent producers' table dropped."""

    def __init__(
        self, dispatcher: Dispatcher, store: MessageStore, longpoll: LongPollHub, producers: ProducerTable
    ) -> None:
        self.dispatcher = dispatcher
        self.store = store
        self.longpoll = longpoll
        self.producers = producers

    def to_wire(self) -> dict[str, Any]:
        stats, scrub, budget = self.store.stats, self.store.scrub_stats, self.dispatcher.budget
        return {
            "requests": {str(code): n for code, n in sorted(self.dispatcher.counters.items())},
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
            "longPollWaiting": self.longpoll.waiting,
            "duplicatesDropped": self.producers.duplicates_dropped,
            "systemBusy": budget.refused,  # requests refused: too many bytes in flight
            "inflightRequestBytes": budget.inflight_bytes,
            "inflightRequestBytesPeak": budget.peak_bytes,
            "time": int(time.time() * 1000),
        }
