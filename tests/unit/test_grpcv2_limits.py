"""The declared limits of every served v2 request: complete, and each refusal a 4xx sentence
naming the field, the value and what is allowed (or, for a lite topic's field, NOT_IMPLEMENTED
saying what to use instead)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from rocketspark.grpcv2.consuming import Consuming
from rocketspark.grpcv2.endpoint import Endpoint
from rocketspark.grpcv2.limits import Absent, Limits, PopLimits
from rocketspark.grpcv2.sending import Sending
from rocketspark.grpcv2.stubs import definition_pb2 as pb
from rocketspark.grpcv2.stubs import service_pb2 as sv
from rocketspark.grpcv2.translate import Refused

NOW_MS = 1_795_000_000_000  # 2026-11-18
LIMITS = Limits(PopLimits(min_invisible_ms=10_000, max_invisible_ms=12 * 3_600_000, max_reconsume_times=16))
WORDS = (FieldDescriptor.TYPE_STRING, FieldDescriptor.TYPE_BYTES, FieldDescriptor.TYPE_BOOL)
TIMES = ("google.protobuf.Timestamp", "google.protobuf.Duration")


def checked_fields(descriptor: Descriptor, prefix: str = "") -> Iterator[str]:
    """The path of every numeric, enum, time and duration field under ``descriptor``."""
    for field in descriptor.fields:
        path = prefix + field.name + ("[]" if field.is_repeated else "")
        if field.type == FieldDescriptor.TYPE_MESSAGE:
            if field.message_type.GetOptions().map_entry:
                continue
            if field.message_type.full_name in TIMES:
                yield path
            else:
                yield from checked_fields(field.message_type, path + ".")
        elif field.type not in WORDS:
            yield path


def served() -> dict[str, Descriptor]:
    service = sv.DESCRIPTOR.services_by_name["MessagingService"]
    return {
        m.name: m.input_type for m in service.methods if any(hasattr(c, m.name) for c in (Endpoint, Consuming, Sending))
    }


def test_every_numeric_enum_time_and_duration_field_of_every_served_request_has_a_limit() -> None:
    requests = served()
    assert set(LIMITS.rules) == {d.name for d in requests.values()}
    for method, descriptor in requests.items():
        fields = set(checked_fields(descriptor))
        if method == "Telemetry":  # only settings are acted on; other commands are ignored whole
            fields = {f for f in fields if f.startswith("settings.")}
        # Absent rules refuse a field not served (a lite topic's), strings included.
        declared = {rule.path for rule in LIMITS.rules[descriptor.name] if not isinstance(rule, Absent)}
        assert fields == declared, (method, sorted(fields ^ declared))


def refusal(request: object) -> Refused:
    with pytest.raises(Refused) as refused:
        LIMITS.check(request, now_ms=NOW_MS)  # type: ignore[arg-type]
    code = refused.value.v2_code
    assert 40000 <= code < 50000 or code == pb.Code.NOT_IMPLEMENTED  # never an internal error
    return refused.value


def send(**times: tuple[int, int]) -> sv.SendMessageRequest:
    message = pb.Message(topic=pb.Resource(name="t"), body=b"x")
    for name, (seconds, nanos) in times.items():
        stamp = getattr(message.system_properties, name)
        stamp.seconds, stamp.nanos = seconds, nanos
    return sv.SendMessageRequest(messages=[message])


def test_a_delivery_time_is_read_in_seconds_or_the_python_clients_milliseconds_and_held_to_72_hours() -> None:
    in_an_hour = NOW_MS + 3_600_000
    LIMITS.check(send(delivery_timestamp=(in_an_hour, 0)), now_ms=NOW_MS)  # the Python client's milliseconds
    LIMITS.check(send(delivery_timestamp=(in_an_hour // 1000, 5)), now_ms=NOW_MS)  # the Java client's
    LIMITS.check(send(delivery_timestamp=(1, 0)), now_ms=NOW_MS)  # long past: delivered at once
    too_far = refusal(send(delivery_timestamp=(NOW_MS + 73 * 3_600_000, 0)))
    assert too_far.v2_code == pb.Code.ILLEGAL_DELIVERY_TIME
    assert too_far.message.startswith("messages[0].system_properties.delivery_timestamp is 2026-11-21T")
    assert "allowed: 1970-01-01T00:00:00.000Z to 72 h from now (RocketMQ's timer limit" in too_far.message
    for seconds, nanos, said in (
        (-1, 0, "is 1969-12-31T23:59:59.000Z (-1000 ms); allowed: 1970-01-01T00:00:00.000Z"),
        (10**17, 0, "has seconds 100000000000000000: neither a time in seconds"),
        (-(10**12), 0, "has seconds -1000000000000: neither a time in seconds"),
        (NOW_MS, 7, "read as milliseconds (the Python client's way), so its nanos must be 0"),
        (100, -1, "is not a valid Timestamp (seconds 100, nanos -1)"),
        (100, 10**9, "is not a valid Timestamp (seconds 100, nanos 1000000000)"),
    ):
        refused = refusal(send(delivery_timestamp=(seconds, nanos)))
        assert refused.v2_code == pb.Code.ILLEGAL_DELIVERY_TIME and said in refused.message, refused.message
    born = refusal(send(born_timestamp=(-5, 0)))
    assert born.v2_code == pb.Code.BAD_REQUEST and "born_timestamp is 1969-12-31T23:59:55.000Z" in born.message


def test_durations_counts_and_enums_out_of_range_are_refused_with_their_own_codes() -> None:
    receive = sv.ReceiveMessageRequest(batch_size=1)
    receive.invisible_duration.FromMilliseconds(100)
    refused = refusal(receive)
    assert refused.v2_code == pb.Code.ILLEGAL_INVISIBLE_TIME
    assert refused.message == (
        "invisible_duration is 100 ms; allowed: 10000 ms to 43200000 ms "
        "(the broker's pop_min_invisible_ms to pop_max_invisible_ms)"
    )
    receive = sv.ReceiveMessageRequest(batch_size=33)
    assert refusal(receive).message == "batch_size is 33; allowed: 1 to 32 (RocketMQ's pop limit)"
    receive = sv.ReceiveMessageRequest(batch_size=1)
    receive.long_polling_timeout.seconds, receive.long_polling_timeout.nanos = 5, -1
    refused = refusal(receive)
    assert (
        refused.v2_code == pb.Code.ILLEGAL_POLLING_TIME and "nanos must be -999999999 to 999999999" in refused.message
    )
    change = refusal(sv.ChangeInvisibleDurationRequest())  # required: no duration is 0 ms
    assert change.v2_code == pb.Code.ILLEGAL_INVISIBLE_TIME and "is 0 ms; allowed: 1 ms" in change.message
    heartbeat = refusal(sv.HeartbeatRequest(client_type=99))  # type: ignore[arg-type]
    assert heartbeat.v2_code == pb.Code.UNRECOGNIZED_CLIENT_TYPE and heartbeat.message.startswith("client_type is 99;")
    lite_request = sv.SendMessageRequest(messages=[pb.Message()])  # a message type not served
    lite_request.messages[0].system_properties.message_type = pb.MessageType.LITE
    lite = refusal(lite_request)
    assert lite.v2_code == pb.Code.NOT_IMPLEMENTED
    assert "message_type is LITE; allowed: MESSAGE_TYPE_UNSPECIFIED, NORMAL, FIFO, DELAY, TRANSACTION, PRIORITY" in (
        lite.message
    )
    assert "lite topics (RocketMQ 5.5, RIP-83) are not supported" in lite.message
    lite_request.messages[0].system_properties.message_type = pb.MessageType.NORMAL
    lite_request.messages[0].system_properties.lite_topic = "session-1"
    named = refusal(lite_request)
    assert named.v2_code == pb.Code.NOT_IMPLEMENTED
    assert named.message.startswith("messages[0].system_properties.lite_topic is set ('session-1'): lite topics")
    lite_consumer = refusal(sv.HeartbeatRequest(client_type=pb.ClientType.LITE_SIMPLE_CONSUMER))
    assert lite_consumer.v2_code == pb.Code.NOT_IMPLEMENTED
    assert lite_consumer.message.startswith("client_type is LITE_SIMPLE_CONSUMER; allowed: ")
    assert "consume it with a SimpleConsumer or PushConsumer" in lite_consumer.message
    negative = sv.SendMessageRequest(messages=[pb.Message()])
    negative.messages[0].system_properties.priority = -1
    below = refusal(negative).message
    assert below.startswith("messages[0].system_properties.priority is -1; allowed: 0 to 2147483647")
    settings = sv.TelemetryCommand(settings=pb.Settings())
    settings.settings.backoff_policy.exponential_backoff.multiplier = float("nan")
    assert "multiplier is nan; allowed: 0 to 100" in refusal(settings).message
    forward = refusal(sv.ForwardMessageToDeadLetterQueueRequest(delivery_attempt=18, max_delivery_attempts=17))
    assert forward.message.startswith("delivery_attempt is 18; allowed: 1 to 17")
    LIMITS.check(sv.TelemetryCommand(thread_stack_trace=sv.ThreadStackTrace()), now_ms=NOW_MS)  # ignored whole
