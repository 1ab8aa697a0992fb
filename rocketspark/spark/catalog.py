"""Driver-side knowledge of the topics a query reads: their queues, bounds and start offsets.

Lives only in Spark's driver-side Python worker (the source's long-lived runner). The client
is created lazily there, never pickled to executors. Latest offsets are fetched with one
request per broker (its per-queue min/max table) and reused for ``latestOffsetCacheMs``,
because an idle query asks for them about 90 times a second. Routes come from the client's
route cache, which route pushes and polling keep current; a route a moment old plans safely,
because the records at a planned offset never change.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

from rocketspark.client.consumer import Consumer
from rocketspark.client.logical import LogicalQueue, logical_view
from rocketspark.client.topic_stats import fetch_topic_stats, queue_bounds
from rocketspark.errors import ConnectError, NoPermissionError, NoRouteInfoError, OptionError, TopicNotExistError
from rocketspark.protocol.bodies import unpack
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.types import TopicRouteData
from rocketspark.protocol.validation import AUTO_CREATE_TOPIC
from rocketspark.spark.access import refused, unreachable
from rocketspark.spark.option_values import EARLIEST, LATEST
from rocketspark.spark.options import ReaderOptions
from rocketspark.spark.planning import Bounds

Offsets = dict[str, dict[int, int]]  # topic -> logical queue id -> logical offset


def ordered(offsets: Offsets) -> dict[str, dict[str, int]]:
    """Offsets as Spark stores them: JSON with keys in a fixed order (Spark compares strings)."""
    return {topic: {str(q): offsets[topic][q] for q in sorted(offsets[topic])} for topic in sorted(offsets)}


def parse(offset: dict[str, dict[str, int]] | None) -> Offsets:
    return {topic: {int(q): int(o) for q, o in queues.items()} for topic, queues in (offset or {}).items()}


def _route_and_view(route: TopicRouteData) -> tuple[TopicRouteData, list[LogicalQueue]]:
    """A route with its logical view, built once per route by the route cache (``derive``)."""
    return route, logical_view(route)


@dataclass(frozen=True, slots=True)
class TopicState:
    topic: str
    queues: dict[int, LogicalQueue]  # the logical queues this query reads
    bounds: dict[int, Bounds]
    fetched_at: float

    @property
    def latest(self) -> dict[int, int]:
        return {q: b.high for q, b in self.bounds.items()}


class Catalog:
    """Topics, logical queues and their bounds, as the query sees them now."""

    def __init__(self, options: ReaderOptions) -> None:
        self.options = options
        self.consumer = Consumer(
            list(options.nameservers), timeout_ms=options.pull_timeout_ms, **options.connection.client_kwargs()
        )
        self._states: dict[str, TopicState] = {}
        self._topics: tuple[float, list[str]] | None = None

    def close(self) -> None:
        self.consumer.close()

    # -- topics -------------------------------------------------------------------------------

    def topics(self) -> list[str]:
        opts = self.options
        if opts.topics:
            return list(opts.topics)
        if opts.assign is not None:
            return sorted(opts.assign)
        now = time.monotonic()
        if self._topics is None or now - self._topics[0] > 1.0:
            pattern = re.compile(opts.topic_pattern or "")
            request = RemotingCommand.request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
            try:
                listed: list[str] = unpack(self.consumer.routes.namesrv.call(request).body)
            except ConnectError as exc:
                raise unreachable(exc, opts.nameservers) from None
            except NoPermissionError as exc:
                raise refused(exc, opts.nameservers, "topic list (option topicPattern)") from None
            names = [t for t in listed if pattern.fullmatch(t) and t != AUTO_CREATE_TOPIC]
            self._topics = (now, names)
        return self._topics[1]

    # -- queues and bounds ------------------------------------------------------------------------

    def state(self, topic: str, *, fresh: bool = False) -> TopicState:
        """Queues and bounds of a topic, fetched at most every ``latestOffsetCacheMs``."""
        cached = self._states.get(topic)
        max_age = self.options.latest_offset_cache_ms / 1000
        if cached is not None and not fresh and time.monotonic() - cached.fetched_at < max_age:
            return cached
        try:
            return self._fetch(topic)
        except NoPermissionError as exc:
            raise refused(exc, self.options.nameservers, f'reads of topic "{topic}"') from None

    def _fetch(self, topic: str) -> TopicState:
        try:
            route, view = self.consumer.routes.derive(topic, _route_and_view)
        except NoRouteInfoError:
            raise self._missing(topic) from None
        except ConnectError as exc:
            raise unreachable(exc, self.options.nameservers) from None
        wanted = self.options.assign.get(topic) if self.options.assign else None
        if wanted is not None:
            bad = [q for q in wanted if q >= len(view)]
            if bad:
                raise OptionError(
                    f'option "assign": topic "{topic}" has no logical queue {bad[0]} (it has {len(view)})'
                )
        queues = {q.queue_id: q for q in view if wanted is None or q.queue_id in wanted}
        stats = fetch_topic_stats(self.consumer, route)
        bounds = {q: Bounds(*queue_bounds(queue, stats)) for q, queue in queues.items()}
        state = self._states[topic] = TopicState(topic, queues, bounds, time.monotonic())
        return state

    def states(self) -> dict[str, TopicState]:
        """Every topic read, each as one consistent fetch."""
        return {t: self.state(t) for t in self.topics()}

    def _missing(self, topic: str) -> TopicNotExistError:
        return TopicNotExistError(
            f'topic "{topic}" (option "{"topic" if self.options.topics else "assign"}") does not exist on the '
            f"cluster at {', '.join(self.options.nameservers)}: create it first (rocketspark admin create-topic "
            f"{topic}) or fix the name"
        )

    def latest(self, *, fresh: bool = False) -> Offsets:
        return {t: self.state(t, fresh=fresh).latest for t in self.topics()}

    def earliest(self) -> Offsets:
        return {t: {q: b.low for q, b in self.state(t).bounds.items()} for t in self.topics()}

    # -- starting points ---------------------------------------------------------------------------

    def resolve(self, spec: str | dict[str, dict[int, int]], name: str) -> Offsets:
        """``earliest`` / ``latest`` / JSON (with -2 and -1) into concrete logical offsets."""
        earliest, latest = self.earliest(), self.latest()
        if spec == "earliest":
            return earliest
        if spec == "latest":
            return latest
        assert isinstance(spec, dict)
        unknown = sorted(set(spec) - set(latest))
        if unknown:
            raise OptionError(f'option "{name}" names topic "{unknown[0]}", which this query does not read')
        out: Offsets = {}
        for topic in latest:
            given = spec.get(topic)
            if given is None:
                raise OptionError(f'option "{name}" must give offsets for every topic read; "{topic}" is missing')
            missing = sorted(set(latest[topic]) - set(given))
            if missing:
                raise OptionError(
                    f'option "{name}" must give an offset for every logical queue of "{topic}"; queue {missing[0]} '
                    f"is missing (use -2 for earliest, -1 for latest)"
                )
            out[topic] = {
                q: earliest[topic][q] if o == EARLIEST else latest[topic][q] if o == LATEST else o
                for q, o in given.items()
                if q in latest[topic]
            }
        return out

    def by_timestamp(self, timestamps: dict[str, dict[int, int]], strategy: str, name: str) -> Offsets:
        """The first logical offset stored at or after each queue's timestamp."""
        latest = self.latest()
        out: Offsets = {}
        for topic, queues in latest.items():
            wanted = timestamps.get(topic)
            if wanted is None:
                raise OptionError(f'option "{name}" must give a timestamp for topic "{topic}"')
            out[topic] = {}
            for q, high in queues.items():
                if q not in wanted:
                    raise OptionError(f'option "{name}" has no timestamp for logical queue {q} of "{topic}"')
                found = self.consumer.offset_for_timestamp(topic, q, wanted[q])
                if found >= high and strategy == "error" and high > self.state(topic).bounds[q].low:
                    newest = self._newest_store_time(topic, q, high)
                    if newest is not None and newest < wanted[q]:
                        raise OptionError(
                            f'option "{name}": no message of {topic} queue {q} was stored at or after {wanted[q]} '
                            '(set startingOffsetsByTimestampStrategy to "latest" to start there instead)'
                        )
                out[topic][q] = found
        return out

    def _newest_store_time(self, topic: str, q: int, high: int) -> int | None:
        result = self.consumer.pull(topic, q, max(high - 1, 0), 1)
        return result.messages[0].store_timestamp if result.messages else None

    def starting_offsets(self) -> Offsets:
        """Where a new query starts, with Kafka's precedence: timestamp, then per-queue
        timestamps, then startingOffsets."""
        opts = self.options
        if opts.starting_timestamp is not None:
            stamps = {t: dict.fromkeys(qs, opts.starting_timestamp) for t, qs in self.latest().items()}
            return self.by_timestamp(stamps, opts.timestamp_strategy, "startingTimestamp")
        if opts.starting_by_timestamp is not None:
            return self.by_timestamp(opts.starting_by_timestamp, opts.timestamp_strategy, "startingOffsetsByTimestamp")
        return self.resolve(opts.starting, "startingOffsets")

    def ending_offsets(self) -> Offsets:
        opts = self.options
        if opts.ending_timestamp is not None:
            stamps = {t: dict.fromkeys(qs, opts.ending_timestamp) for t, qs in self.latest().items()}
            return self.by_timestamp(stamps, "latest", "endingTimestamp")
        return self.resolve(opts.ending, "endingOffsets")
