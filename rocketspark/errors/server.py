"""Errors a server answers with: one class per non-success response code of a broker or a
nameserver (the controller's are in :mod:`rocketspark.errors.controller`)."""

from __future__ import annotations

from rocketspark.errors.base import RocketSparkError
from rocketspark.protocol.codes import ResponseCode


class ServerError(RocketSparkError):
    """A peer answered with a non-success response code."""


class SystemError_(ServerError):  # noqa: N801 - the trailing underscore avoids shadowing the builtin
    code = int(ResponseCode.SYSTEM_ERROR)


class SystemBusyError(ServerError):
    """A broker refused a request at once because its in-flight request budget
    (``max_inflight_request_bytes``) was full; nothing was stored. The broker's answer carries
    the numbers (``inflightBytes``, ``requestBytes``, ``limitBytes``); a producer that gives up
    after such answers says which broker, how many times and the budget."""

    code = int(ResponseCode.SYSTEM_BUSY)
    retriable = True
    wire_details = ("inflightBytes", "requestBytes", "limitBytes")


class RequestCodeNotSupported(ServerError):
    code = int(ResponseCode.REQUEST_CODE_NOT_SUPPORTED)


class FlushDiskTimeoutError(ServerError):
    code = int(ResponseCode.FLUSH_DISK_TIMEOUT)


class SlaveNotAvailableError(ServerError):
    """The group has fewer in-sync replicas than ``in_sync_replicas`` asks; the send was not
    stored (a retry is safe: slaves rejoin the set as they catch up)."""

    code = int(ResponseCode.SLAVE_NOT_AVAILABLE)
    retriable = True


class FlushSlaveTimeoutError(ServerError):
    """Not enough in-sync replicas confirmed the message in time; it is on the master and may
    reach them later. A retry may store it twice."""

    code = int(ResponseCode.FLUSH_SLAVE_TIMEOUT)
    retriable = True


class MessageIllegalError(ServerError):
    code = int(ResponseCode.MESSAGE_ILLEGAL)


class MessageTooLargeError(MessageIllegalError):
    pass


class MessageNotFoundError(ServerError):
    """No stored message matches a look-up by id (QUERY_NOT_FOUND)."""

    code = int(ResponseCode.QUERY_NOT_FOUND)


class ServiceNotAvailableError(ServerError):
    code = int(ResponseCode.SERVICE_NOT_AVAILABLE)
    retriable = True


class StoreWriteError(ServiceNotAvailableError):
    """The broker could not write its store (ENOSPC, EIO): nothing of the request was stored,
    and the broker keeps serving reads. Another broker may take the write."""


class DiskFullError(StoreWriteError):
    """The broker's disk is above ``disk_refuse_writes_ratio``: sends are refused (nothing is
    stored) until space is freed; reads go on."""


class NoPermissionError(ServerError):
    """The request's user lacks a permission; the message names the user, the action and the
    resource (``user "etl" lacks Pub on Topic:orders``), never a secret."""

    code = int(ResponseCode.NO_PERMISSION)


class AuthenticationError(NoPermissionError):
    """The request is not signed by a known user: no credentials, an unknown access key, a
    signature that does not match, or a clock outside the allowed skew."""


class TopicNotExistError(ServerError):
    code = int(ResponseCode.TOPIC_NOT_EXIST)


class TopicExistAlreadyError(ServerError):
    code = int(ResponseCode.TOPIC_EXIST_ALREADY)


class NotLeaderForQueueError(ServerError):
    code = int(ResponseCode.NOT_LEADER_FOR_QUEUE)
    retriable = True


class InvalidParameterError(ServerError):
    code = int(ResponseCode.INVALID_PARAMETER)


class IllegalTopicNameError(InvalidParameterError):
    pass


class IllegalFilterExpressionError(InvalidParameterError):
    """A subscription's SQL92 filter expression that RocketMQ's grammar does not accept, or
    that uses what it does not have. The message says where (line, column and character
    offset), what was found and what was expected; ``details`` carries ``expression``,
    ``position`` (0-based character offset), ``line``, ``column``, ``found`` and ``expected``.
    The code is RocketMQ's SUBSCRIPTION_PARSE_FAILED."""

    code = int(ResponseCode.SUBSCRIPTION_PARSE_FAILED)
    wire_details = ("expression", "position", "line", "column", "found", "expected")


class MalformedRequestError(ServerError):
    code = int(ResponseCode.MALFORMED_REQUEST)


class BrokerNotExistError(ServerError):
    code = int(ResponseCode.BROKER_NOT_EXIST)


class MappingStaleError(ServerError):
    """The client's mapping of a static topic is older than the broker's; refresh and retry."""

    code = int(ResponseCode.MAPPING_STALE)
    retriable = True


class StoreDamagedError(ServerError):
    """The record at a queue offset is damaged in the commit log: the message is lost on this
    broker. The error names the queue, the offset and the damaged range."""

    code = int(ResponseCode.STORE_DAMAGED)


class QueueRebuiltError(StoreDamagedError):
    """A consume-queue entry disagreed with the record it points to. The broker never answers
    from such an entry: it rebuilt the queue from the commit log, so a retry reads right."""

    retriable = True


class NotMasterError(ServerError):
    """A write reached a replica that is not its group's master, or a master that cannot be
    sure it still is (its lease from the controller ran out): re-read the route and retry."""

    code = int(ResponseCode.NOT_MASTER)
    retriable = True


class NameserverNotReadyError(ServerError):
    """A nameserver restarted and has not yet heard from every broker it served, so it cannot
    say whether a topic exists: ask another nameserver, or again in a moment. Never a
    NoRouteInfoError: nothing may conclude from it that the topic is missing (and create it)."""

    code = int(ResponseCode.NAMESERVER_NOT_READY)
    retriable = True


class ProducerFencedError(ServerError):
    """An idempotent producer sent an epoch older than one the broker has seen from the same
    producer id: a newer instance replaced it. Retrying cannot help."""

    code = int(ResponseCode.PRODUCER_FENCED)


class SubscriptionRefusedError(ServerError):
    """A nameserver kept none, or not all, of a route-change subscription: the client had no
    open push stream there (``streamOpen`` false: nothing was kept), or topics were over its
    per-client cap (``refused`` names them; the rest were kept). The client polls what was
    refused; the same request succeeds once the stream is open or room was made."""

    code = int(ResponseCode.SUBSCRIPTION_REFUSED)
    wire_details = ("streamOpen", "refused")
