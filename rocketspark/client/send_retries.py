"""What a producer does after a send attempt failed: give up, or wait and try again (where).

One policy for every failure, so that a send is one attempt in a loop (``Producer._send_body``):

- a queue that moved (a static topic remapped, a replica group's new master): re-read the
  route and send again, after a short backoff;
- a broker answering SYSTEM_BUSY or too few in-sync replicas (nothing was stored): wait a
  growing, jittered pause and try again, on another broker when the send may move;
- a broker that failed (unreachable, no answer in time, refusing the topic): try another
  broker, at most ``retry_times_when_send_failed`` more times; a pinned send cannot move, so
  it waits for the route to name the queue's new home instead;
- a queue id the cached route does not have: re-read the route once (queues may have been
  added).

All attempts together keep within the send timeout, as RocketMQ's ``sendDefaultImpl`` does.

A send that gives up after busy answers says so: when the time left is too short for another
attempt, or the attempts made after a busy answer failed too (a loaded broker may answer a
short leftover attempt too late), the error is a ``SystemBusyError`` naming the brokers that
answered busy, how often, and the budget they were out of (``max_inflight_request_bytes``,
from the broker's answer), with the last failure appended: never the ``RequestTimeoutError``
of a tiny leftover attempt.
"""

from __future__ import annotations

import logging
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Protocol

from rocketspark.client.selection import PublishInfo, Target
from rocketspark.errors import (
    ConnectError,
    InvalidParameterError,
    MappingStaleError,
    NoPermissionError,
    NotLeaderForQueueError,
    NotMasterError,
    RequestTimeoutError,
    RocketSparkError,
    SlaveNotAvailableError,
    SystemBusyError,
    TopicNotExistError,
)

log = logging.getLogger(__name__)

# Errors after which another broker may succeed (RocketMQ's retryResponseCodes, plus transport:
# a broker that cannot be reached or does not answer in time).
RETRY_ON = (ConnectError, RequestTimeoutError, NoPermissionError, TopicNotExistError)
# Of those, the ones that say the cached route is wrong (not just that a broker is down).
ROUTE_WRONG = (NoPermissionError, TopicNotExistError)
# Errors saying the queue now lives elsewhere (a remap, or a new master of a replica group).
MOVED = (NotLeaderForQueueError, MappingStaleError, NotMasterError)
BUSY = (SystemBusyError, SlaveNotAvailableError)  # nothing was stored
RETRIABLE = (*RETRY_ON, *MOVED, *BUSY, InvalidParameterError)
# Less time than this left of the send timeout: another attempt could only time out (and would
# wrongly mark a healthy broker in the latency table), so the failure is raised instead.
MIN_ATTEMPT_S = 0.05


class Routes(Protocol):
    """What retries do to the route cache (``RouteCache``): drop a topic's route."""

    def invalidate(self, topic: str) -> None: ...


def attempt_timeout_ms(deadline: float, now: float, attempts_left: int, pinned: bool, configured_ms: int | None) -> int:
    """How long the next attempt of a send may wait for its answer. A pinned send is retried
    on the same queue and the last attempt has nothing after it: they get all that is left. Any
    other gets ``configured_ms`` (``send_attempt_timeout_ms``), by default an equal share of
    what is left among the attempts left (1 s each of the default 3 s and 2 retries), and never
    less than ``MIN_ATTEMPT_S`` of what is left: busy answers use up no attempt, so a share of
    what they left over could be too short for any broker to answer."""
    left_ms = max(1, int((deadline - now) * 1000))
    if pinned or attempts_left <= 1:
        return left_ms
    share = configured_ms or max(left_ms // attempts_left, int(MIN_ATTEMPT_S * 1000))
    return max(1, min(left_ms, share))


def _backoff(attempt: int) -> float:
    return float(min(0.025 * 2**attempt, 0.4))


def _busy_backoff(refusals: int) -> float:
    """Pause after the ``refusals``-th SYSTEM_BUSY: 50 ms doubling to 1 s, jittered so that
    the clients a busy broker refused together do not all come back together."""
    return float(min(0.05 * 2 ** (refusals - 1), 1.0) * random.uniform(0.5, 1.0))


@dataclass
class SendRetries:
    """The state of one send's retries; ``after`` decides on each failure."""

    topic: str
    routes: Routes
    attempts: int  # 1 + retry_times_when_send_failed
    deadline: float  # monotonic
    pinned: bool
    avoid: str | None = None  # the broker the next attempt should not pick
    failures: int = 0
    moves: int = 0
    busy: int = 0
    refreshed: bool = False
    started: float = field(default_factory=time.monotonic)
    busy_by_broker: dict[str, int] = field(default_factory=dict)  # SYSTEM_BUSY answers, by broker
    last_busy: SystemBusyError | SlaveNotAvailableError | None = None

    @property
    def attempts_left(self) -> int:
        return self.attempts - self.failures

    def after(self, exc: RocketSparkError, info: PublishInfo, ref: Target | None) -> float:
        """The pause before the next attempt; raises ``exc`` when the send must give up."""
        if isinstance(exc, InvalidParameterError):
            if ref is not None or self.refreshed:  # the broker's answer, or a queue id still unknown
                raise exc
            self.refreshed = True  # the queue count may have grown since the route was cached
            self.routes.invalidate(self.topic)
            return 0.0
        if isinstance(exc, MOVED):
            return self._moved(exc)
        if isinstance(exc, BUSY):
            self.busy += 1
            self.last_busy = exc
            if isinstance(exc, SystemBusyError):
                name = ref.broker_name if ref is not None else "?"
                self.busy_by_broker[name] = self.busy_by_broker.get(name, 0) + 1
            pause = _busy_backoff(self.busy)
            if time.monotonic() + pause + MIN_ATTEMPT_S > self.deadline:
                raise self.gave_up_busy(None) from exc
            self.avoid = ref.broker_name if ref is not None else None
            log.debug("broker %s busy for a send of %s; retrying in %.0f ms", self.avoid, self.topic, pause * 1000)
            return pause
        if not isinstance(exc, RETRY_ON):
            raise exc
        if isinstance(exc, ROUTE_WRONG) and not info.template:
            self.routes.invalidate(self.topic)
        failing_group = ref is not None and ref.broker_name in info.groups
        if isinstance(exc, (ConnectError, RequestTimeoutError)) and failing_group:
            self.routes.invalidate(self.topic)  # a replica group: the route may name a new master soon
            assert ref is not None
            if self.pinned or not {t.broker_name for t in info.queues} - {ref.broker_name}:
                # A pinned queue cannot move, and nothing else takes the send: the group is
                # electing a new master, which the route will name. Wait for it.
                return self._moved(exc)
        elif self.pinned and isinstance(exc, ConnectError):
            return self._moved(exc)  # a broker restarting: wait for it within the timeout
        self.failures += 1
        if self.failures >= self.attempts or self.deadline - time.monotonic() < MIN_ATTEMPT_S:
            if self.last_busy is not None and isinstance(exc, (ConnectError, RequestTimeoutError)):
                raise self.gave_up_busy(exc) from exc  # the busy answers are why the time or tries ran out
            raise exc
        self.avoid = ref.broker_name if ref is not None else None
        log.debug("send of %s failed (attempt %d/%d): %s", self.topic, self.failures, self.attempts, exc)
        return 0.0

    def gave_up_busy(self, last: RocketSparkError | None) -> SystemBusyError | SlaveNotAvailableError:
        """The error of a send that gives up after busy answers: which brokers answered busy,
        how often, the budget they were out of, and what happened last if that was no busy
        answer (``last``)."""
        busy = self.last_busy
        assert busy is not None
        spent = f"{time.monotonic() - self.started:.1f} s"
        after = f"; after that, {last.message}" if last is not None else ""
        if isinstance(busy, SlaveNotAvailableError):
            return SlaveNotAvailableError(
                f"{busy.message} (the send gave up after {self.busy} such answers in {spent}){after}"
            )
        by_count = Counter(self.busy_by_broker).most_common()  # made only here: a Counter a send costs a microsecond
        brokers = ", ".join(f'"{name}" ({n})' for name, n in by_count)
        details = busy.details
        limit, inflight = details.get("limitBytes"), details.get("inflightBytes")
        budget = (
            f"its in-flight request budget (max_inflight_request_bytes) is {limit} bytes and "
            f"{inflight} bytes were in flight when this {details.get('requestBytes')}-byte request came"
            if isinstance(limit, int)
            else "its in-flight request budget (max_inflight_request_bytes) was full"
        )
        return SystemBusyError(
            f'send to topic "{self.topic}" gave up after {spent}: broker{"s" if len(self.busy_by_broker) > 1 else ""} '
            f"{brokers} answered SYSTEM_BUSY {sum(self.busy_by_broker.values())} time(s): {budget}; nothing of this "
            "send was stored. Send fewer or smaller batches at once, give sends more time (send_timeout_ms), or "
            f"raise the broker's max_inflight_request_bytes{after}",
            broker=by_count[0][0],
            busyAnswers=sum(self.busy_by_broker.values()),
            **{k: v for k, v in details.items() if k in SystemBusyError.wire_details},
        )

    def _moved(self, exc: RocketSparkError) -> float:
        self.routes.invalidate(self.topic)
        self.moves += 1
        pause = _backoff(self.moves)
        if time.monotonic() + pause > self.deadline:
            raise exc
        log.debug("queue of %s moved (%s); retrying", self.topic, exc)
        return pause
