"""The error hierarchy and its code table."""

from __future__ import annotations

from rocketspark import errors
from rocketspark.protocol.codes import ResponseCode


def test_every_server_error_code_maps_back_to_its_most_general_class() -> None:
    assert type(errors.error_for_response(ResponseCode.TOPIC_NOT_EXIST, "x")) is errors.TopicNotExistError
    assert type(errors.error_for_response(ResponseCode.MESSAGE_ILLEGAL, "x")) is errors.MessageIllegalError
    assert type(errors.error_for_response(ResponseCode.SYSTEM_BUSY, "x")) is errors.SystemBusyError


def test_the_servers_class_name_selects_a_more_specific_subclass() -> None:
    err = errors.error_for_response(ResponseCode.MESSAGE_ILLEGAL, "too big", "MessageTooLargeError")
    assert isinstance(err, errors.MessageTooLargeError) and err.message == "too big"


def test_a_class_name_from_another_code_is_ignored() -> None:
    err = errors.error_for_response(ResponseCode.TOPIC_NOT_EXIST, "x", "MessageTooLargeError")
    assert type(err) is errors.TopicNotExistError


def test_an_unknown_code_becomes_a_server_error_that_keeps_the_code() -> None:
    err = errors.error_for_response(4242, "")
    assert type(err) is errors.ServerError and err.details["code"] == 4242
    assert "4242" in err.message


def test_retriable_errors_are_marked() -> None:
    assert errors.ConnectError.retriable and errors.SystemBusyError.retriable
    assert not errors.TopicNotExistError.retriable and not errors.MessageTooLargeError.retriable


def every_subclass(cls: type[errors.RocketSparkError]) -> list[type[errors.RocketSparkError]]:
    """The whole hierarchy under ``cls``, as Python knows it (what the code table is built from)."""
    return [sub for direct in cls.__subclasses__() for sub in (direct, *every_subclass(direct))]


def test_codes_are_distinct_across_unrelated_classes() -> None:
    seen: dict[int, type] = {}
    for cls in every_subclass(errors.RocketSparkError):
        if cls in (errors.ClientError, errors.ServerError):
            continue  # abstract families, never raised
        if cls.code in seen and not (issubclass(cls, seen[cls.code]) or issubclass(seen[cls.code], cls)):
            raise AssertionError(f"{cls.__name__} and {seen[cls.code].__name__} share code {cls.code}")
        seen.setdefault(cls.code, cls)


def test_an_errors_wire_details_cross_to_the_client_and_no_others() -> None:
    sent = errors.SystemBusyError("busy", inflightBytes=10, requestBytes=70_000, limitBytes=64, local="kept here")
    ext = {"error": "SystemBusyError", **errors.wire_details(sent)}
    assert ext == {"error": "SystemBusyError", "inflightBytes": 10, "requestBytes": 70_000, "limitBytes": 64}
    got = errors.error_for_response(ResponseCode.SYSTEM_BUSY, "busy", "SystemBusyError", ext)
    assert got.details == {"inflightBytes": 10, "requestBytes": 70_000, "limitBytes": 64}
    refused = errors.error_for_response(
        ResponseCode.SUBSCRIPTION_REFUSED, "no stream", None, {"streamOpen": False, "refused": ["a"], "x": 1}
    )
    assert type(refused) is errors.SubscriptionRefusedError
    assert refused.details == {"streamOpen": False, "refused": ["a"]}
    assert errors.error_for_response(ResponseCode.TOPIC_NOT_EXIST, "x", None, {"streamOpen": True}).details == {}
