"""What the v2 endpoint accepts in every numeric, enum, time and duration field of the requests
it serves: declared here, request by request (``declared``), and checked at the edge before a
handler does any work (``Limits.check``).

A value out of range is refused with a 4xx v2 status (the specific ``ILLEGAL_*`` code where the
protocol has one, else ``BAD_REQUEST``) and a sentence naming the field, the value and what is
allowed. So nothing out of range reaches protobuf's conversions (they raise ``ValueError`` for a
time outside the years 1 to 9999) or our own code. A field the endpoint does not act on (a
server-set property a producer echoes, a setting the endpoint answers with its own value) is held
to what the field can mean all the same: garbage there is a client's bug, said at once.

Times are read as :func:`rocketspark.grpcv2.translate.millis` reads them (the Python client's
milliseconds in ``seconds`` included). Each rule's ``path`` names a field from the request down;
``[]`` marks a repeated field (each element is checked). A message-typed field that is not set
is not checked unless the rule says it is ``required``.

Telemetry: only a command's ``settings`` are acted on, so only they are declared; the other
commands a client may send (thread dumps, verification results) are ignored whole.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final, Protocol

from google.protobuf.message import Message

from rocketspark.grpcv2.stubs import definition_pb2 as pb
from rocketspark.grpcv2.translate import FIRST_SECOND, LAST_MILLI, LAST_SECOND, Refused, millis
from rocketspark.protocol.properties import MAX_PRIORITY

MAX_DELAY_MS: Final = 3 * 24 * 3_600_000  # RocketMQ's timerMaxDelaySec: a delay message is at most 72 h ahead
MAX_RECEIVE_BATCH: Final = 32  # RocketMQ's pop takes at most 32 messages a call
MAX_QUEUE_ID: Final = 65_535  # a topic has at most 1024 queues per broker: no topic has this many
MAX_BROKER_ID: Final = 1023  # replica ids are 0 to 1023 (broker config)
MAX_PORT: Final = 65_535
LONGEST_WAIT_MS: Final = 3_600_000  # no timeout, backoff or long poll a client means is longer than an hour
LONGEST_RECOVERY_MS: Final = 24 * 3_600_000  # a transaction's recovery delay: a day
MOST_ATTEMPTS: Final = 1000  # a retry policy's attempts (RocketMQ's: 3 for producers, 17 for consumers)
MOST_MULTIPLIER: Final = 100.0  # an exponential backoff's multiplier (RocketMQ's: 2)
MOST_BODY_BYTES: Final = 1 << 30  # a client's own body limit (the Python client's is 128 MiB)
LARGEST_OFFSET: Final = (1 << 63) - 1
MAX_DURATION_S: Final = 315_576_000_000  # protobuf's Duration: +-10,000 years
PUSH_INVISIBLE_MS: Final = 60_000  # a PushConsumer's invisible duration (RocketMQ's), if the limits allow

BAD: Final = pb.Code.BAD_REQUEST
EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
SERVED_TYPES: Final = (
    pb.MessageType.MESSAGE_TYPE_UNSPECIFIED,
    pb.MessageType.NORMAL,
    pb.MessageType.FIFO,
    pb.MessageType.DELAY,
    pb.MessageType.TRANSACTION,
    pb.MessageType.PRIORITY,
)
NOT_SERVED: Final = pb.Code.NOT_IMPLEMENTED
# What a LiteTopic (RIP-83) client hears: not served, and what to use instead.
NO_LITE: Final = (
    "lite topics (RocketMQ 5.5, RIP-83) are not supported by rocketspark's v2 endpoint; send to a normal "
    "topic with a message_group per session (each group is consumed in order) and consume it with a "
    "SimpleConsumer or PushConsumer"
)
LITE_CLIENTS: Final = (pb.ClientType.LITE_PUSH_CONSUMER, pb.ClientType.LITE_SIMPLE_CONSUMER)


class Rule(Protocol):
    @property
    def path(self) -> str: ...
    @property
    def code(self) -> int: ...
    @property
    def required(self) -> bool: ...

    def problem(self, value: Any, now_ms: int) -> str | None:
        """What is wrong with ``value`` (a sentence's end after the field's name), or None."""


@dataclass(frozen=True, slots=True)
class Number:
    """An integer or float field: ``low`` to ``high``; a NaN is never in range."""

    path: str
    low: float
    high: float
    code: int = BAD
    why: str = ""
    required: bool = False

    def problem(self, value: float, now_ms: int) -> str | None:
        if self.low <= value <= self.high:
            return None
        return f"is {value}; allowed: {_num(self.low)} to {_num(self.high)}{_why(self.why)}"


@dataclass(frozen=True, slots=True)
class Choice:
    """An enum field: one of ``allowed`` (every value the protocol defines, unless given)."""

    path: str
    enum: Any  # the stubs' EnumTypeWrapper
    allowed: tuple[int, ...] = ()
    code: int = BAD
    why: str = ""
    required: bool = False

    def problem(self, value: int, now_ms: int) -> str | None:
        allowed = self.allowed or tuple(self.enum.values())
        if value in allowed:
            return None
        name = self.enum.Name(value) if value in self.enum.values() else str(value)
        return f"is {name}; allowed: {', '.join(self.enum.Name(v) for v in allowed)}{_why(self.why)}"


@dataclass(frozen=True, slots=True)
class Span:
    """A ``google.protobuf.Duration``: well formed, and ``low_ms`` to ``high_ms`` long."""

    path: str
    low_ms: int
    high_ms: int
    code: int = BAD
    why: str = ""
    required: bool = False

    def problem(self, value: Any, now_ms: int) -> str | None:
        seconds, nanos = int(value.seconds), int(value.nanos)
        if not -999_999_999 <= nanos <= 999_999_999 or (seconds > 0 > nanos) or (seconds < 0 < nanos):
            return (
                f"is not a valid Duration (seconds {seconds}, nanos {nanos}): nanos must be -999999999 to "
                "999999999, with the sign of seconds"
            )
        if abs(seconds) > MAX_DURATION_S:
            return f"is not a valid Duration: seconds {seconds} is beyond protobuf's +-{MAX_DURATION_S}"
        ms = seconds * 1000 + int(nanos / 1_000_000)
        if self.low_ms <= ms <= self.high_ms:
            return None
        return f"is {ms} ms; allowed: {self.low_ms} ms to {self.high_ms} ms{_why(self.why)}"


@dataclass(frozen=True, slots=True)
class Moment:
    """A ``google.protobuf.Timestamp``: well formed, read as the clients write it, and from
    ``low_ms`` to ``ahead_ms`` from now (or to the year 9999)."""

    path: str
    low_ms: int = 0
    ahead_ms: int | None = None
    code: int = BAD
    why: str = ""
    required: bool = False

    def problem(self, value: Any, now_ms: int) -> str | None:
        seconds, nanos = int(value.seconds), int(value.nanos)
        if not 0 <= nanos <= 999_999_999:
            return f"is not a valid Timestamp (seconds {seconds}, nanos {nanos}): nanos must be 0 to 999999999"
        if seconds < FIRST_SECOND or seconds > LAST_MILLI:
            return (
                f"has seconds {seconds}: neither a time in seconds ({FIRST_SECOND} to {LAST_SECOND}, the years "
                f"1 to 9999) nor one in milliseconds (up to {LAST_MILLI})"
            )
        if seconds > LAST_SECOND and nanos:
            return f"has seconds {seconds}, read as milliseconds (the Python client's way), so its nanos must be 0"
        ms = millis(value)
        high = LAST_MILLI if self.ahead_ms is None else now_ms + self.ahead_ms
        if self.low_ms <= ms <= high:
            return None
        upper = _when(high) if self.ahead_ms is None else f"{self.ahead_ms // 3_600_000} h from now"
        return f"is {_when(ms)} ({ms} ms); allowed: {_when(self.low_ms)} to {upper}{_why(self.why)}"


@dataclass(frozen=True, slots=True)
class Absent:
    """A field the endpoint does not serve: set at all (even empty, where it has presence), it
    is refused with ``code`` and ``why``."""

    path: str
    code: int = BAD
    why: str = ""
    required: bool = False

    def problem(self, value: Any, now_ms: int) -> str | None:
        return f"is set ({value!r}): {self.why}"


@dataclass(frozen=True, slots=True)
class PopLimits:
    """The broker's limits on pop consumption (``pop_*`` keys of ``broker.config``, where
    their defaults are): invisible durations a receive may ask, deliveries before the DLQ."""

    min_invisible_ms: int
    max_invisible_ms: int
    max_reconsume_times: int

    @property
    def max_attempts(self) -> int:
        return self.max_reconsume_times + 1

    @property
    def default_invisible_ms(self) -> int:
        """What a PushConsumer's deliveries get (it asks for none: auto renew), within the limits."""
        return max(self.min_invisible_ms, min(PUSH_INVISIBLE_MS, self.max_invisible_ms))


def declared(pop: PopLimits) -> dict[str, tuple[Rule, ...]]:
    """Every served request's rules, by its message type's name; ``pop``: the broker's limits
    on invisible durations and delivery attempts."""
    attempts = pop.max_attempts
    return {
        "QueryRouteRequest": _endpoints("endpoints"),
        "QueryAssignmentRequest": _endpoints("endpoints"),
        "HeartbeatRequest": _client_type("client_type"),
        "SendMessageRequest": _send(pop),
        "ReceiveMessageRequest": _receive(pop),
        "AckMessageRequest": (Absent("entries[].lite_topic", NOT_SERVED, NO_LITE),),
        "RecallMessageRequest": (),
        "ChangeInvisibleDurationRequest": (
            Span(
                "invisible_duration",
                1,
                pop.max_invisible_ms,
                pb.Code.ILLEGAL_INVISIBLE_TIME,
                why="a nack's backoff may be short; at most the broker's pop_max_invisible_ms",
                required=True,
            ),
            Absent("lite_topic", NOT_SERVED, NO_LITE),
        ),
        "ForwardMessageToDeadLetterQueueRequest": (
            Number("delivery_attempt", 1, attempts, why=_per_broker(pop)),
            Number("max_delivery_attempts", 1, attempts, why=_per_broker(pop)),
            Absent("lite_topic", NOT_SERVED, NO_LITE),
        ),
        "EndTransactionRequest": (
            Choice(
                "resolution",
                pb.TransactionResolution,
                (pb.TransactionResolution.COMMIT, pb.TransactionResolution.ROLLBACK),
            ),
            Choice("source", pb.TransactionSource),
        ),
        "NotifyClientTerminationRequest": (),
        "TelemetryCommand": _settings("settings."),
    }


def _per_broker(pop: PopLimits) -> str:
    return f"the most this broker delivers a message (pop_max_reconsume_times + 1 = {pop.max_attempts})"


def _send(pop: PopLimits) -> tuple[Rule, ...]:
    """SendMessageRequest: each message's system properties."""
    message = "messages[].system_properties."
    return (
        Choice(message + "body_digest.type", pb.DigestType),
        Choice(message + "body_encoding", pb.Encoding),
        Choice(message + "message_type", pb.MessageType),
        Choice(message + "message_type", pb.MessageType, SERVED_TYPES, NOT_SERVED, why=NO_LITE),
        Absent(message + "lite_topic", NOT_SERVED, NO_LITE),
        Moment(message + "born_timestamp"),
        Moment(message + "store_timestamp"),
        Moment(
            message + "delivery_timestamp",
            ahead_ms=MAX_DELAY_MS,
            code=pb.Code.ILLEGAL_DELIVERY_TIME,
            why="RocketMQ's timer limit; a time past is delivered at once",
        ),
        Number(message + "queue_id", 0, MAX_QUEUE_ID),
        Number(message + "queue_offset", 0, LARGEST_OFFSET),
        Span(message + "invisible_duration", 0, pop.max_invisible_ms, pb.Code.ILLEGAL_INVISIBLE_TIME),
        Number(message + "delivery_attempt", 0, pop.max_attempts, why=_per_broker(pop)),
        Span(message + "orphaned_transaction_recovery_duration", 0, LONGEST_RECOVERY_MS),
        Number(message + "priority", 0, MAX_PRIORITY, why="RocketMQ's priorities are 0 and up, higher first"),
    )


def _receive(pop: PopLimits) -> tuple[Rule, ...]:
    """ReceiveMessageRequest: the queue it names, its filter, batch, invisibility and wait."""
    return (
        Number("message_queue.id", 0, MAX_QUEUE_ID),
        Choice("message_queue.permission", pb.Permission),
        Number("message_queue.broker.id", 0, MAX_BROKER_ID),
        *_endpoints("message_queue.broker.endpoints"),
        Choice("message_queue.accept_message_types[]", pb.MessageType),
        Choice("filter_expression.type", pb.FilterType, code=pb.Code.ILLEGAL_FILTER_EXPRESSION),
        Number("batch_size", 1, MAX_RECEIVE_BATCH, why="RocketMQ's pop limit"),
        Span(
            "invisible_duration",
            pop.min_invisible_ms,
            pop.max_invisible_ms,
            pb.Code.ILLEGAL_INVISIBLE_TIME,
            why="the broker's pop_min_invisible_ms to pop_max_invisible_ms",
        ),
        Span(
            "long_polling_timeout",
            0,
            LONGEST_WAIT_MS,
            pb.Code.ILLEGAL_POLLING_TIME,
            why="a receive waits at most 30 s, whatever it asks",
        ),
    )


def _client_type(path: str) -> tuple[Rule, ...]:
    """A client type the protocol defines; a lite consumer's is not served."""
    served = tuple(t for t in pb.ClientType.values() if t not in LITE_CLIENTS)
    return (
        Choice(path, pb.ClientType, code=pb.Code.UNRECOGNIZED_CLIENT_TYPE),
        Choice(path, pb.ClientType, served, NOT_SERVED, why=NO_LITE),
    )


def _endpoints(path: str) -> tuple[Rule, ...]:
    code = pb.Code.ILLEGAL_ACCESS_POINT
    return (
        Choice(f"{path}.scheme", pb.AddressScheme, code=code),
        Number(f"{path}.addresses[].port", 0, MAX_PORT, code),
    )


def _settings(path: str) -> tuple[Rule, ...]:
    backoff = f"{path}backoff_policy."
    return (
        *_client_type(f"{path}client_type"),
        *_endpoints(f"{path}access_point"),
        Number(backoff + "max_attempts", 0, MOST_ATTEMPTS),
        Span(backoff + "exponential_backoff.initial", 0, LONGEST_WAIT_MS),
        Span(backoff + "exponential_backoff.max", 0, LONGEST_WAIT_MS),
        Number(backoff + "exponential_backoff.multiplier", 0, MOST_MULTIPLIER),
        Span(backoff + "customized_backoff.next[]", 0, LONGEST_WAIT_MS),
        Span(f"{path}request_timeout", 0, LONGEST_WAIT_MS),
        Number(f"{path}publishing.max_body_size", 0, MOST_BODY_BYTES),
        Choice(
            f"{path}subscription.subscriptions[].expression.type",
            pb.FilterType,
            code=pb.Code.ILLEGAL_FILTER_EXPRESSION,
        ),
        Number(f"{path}subscription.receive_batch_size", 0, MAX_RECEIVE_BATCH, why="RocketMQ's pop limit"),
        Span(f"{path}subscription.long_polling_timeout", 0, LONGEST_WAIT_MS, pb.Code.ILLEGAL_POLLING_TIME),
        Number(f"{path}subscription.lite_subscription_quota", 0, 0, why=NO_LITE),
        Number(f"{path}subscription.max_lite_topic_size", 0, 0, why=NO_LITE),
        Choice(f"{path}user_agent.language", pb.Language),
        *_endpoints(f"{path}metric.endpoints"),
    )


class Limits:
    def __init__(self, pop: PopLimits) -> None:
        self.rules = declared(pop)

    def check(self, request: Message, now_ms: int | None = None) -> None:
        """Refuse ``request`` (``Refused``, a 4xx status) at its first field out of range."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        for rule in self.rules[request.DESCRIPTOR.name]:  # a served request type not declared: a bug, said loudly
            for label, value in _each(request, rule.path.split("."), "", rule.required):
                problem = rule.problem(value, now)
                if problem is not None:
                    raise Refused(rule.code, f"{label} {problem}")


def _each(message: Any, path: list[str], prefix: str, required: bool) -> Iterator[tuple[str, Any]]:
    """Each value at ``path`` under ``message``, with its name (indexed through repeated fields);
    none under a message-typed field that is not set (unless ``required``)."""
    head, rest = path[0], path[1:]
    name = head.removesuffix("[]")
    if head.endswith("[]"):
        for i, item in enumerate(getattr(message, name)):
            label = f"{prefix}{name}[{i}]"
            yield from _each(item, rest, label + ".", required) if rest else [(label, item)]
        return
    field = message.DESCRIPTOR.fields_by_name[name]
    if field.message_type is not None and not message.HasField(name) and not (required and not rest):
        return
    if field.message_type is None and field.has_presence and not message.HasField(name):
        return
    value = getattr(message, name)
    yield from _each(value, rest, f"{prefix}{name}.", required) if rest else [(prefix + name, value)]


def _when(ms: int) -> str:
    moment = EPOCH + timedelta(milliseconds=ms)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _num(value: float) -> str:
    return str(int(value)) if math.isfinite(value) and value == int(value) else str(value)


def _why(why: str) -> str:
    return f" ({why})" if why else ""
