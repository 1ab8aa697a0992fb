"""Every error rocketspark raises, in one hierarchy.

Each class carries its wire ``code`` (a ``ResponseCode`` or a ``ClientErrorCode``)
and whether retrying the same call may succeed (``retriable``). The code-to-class table is
built from the classes themselves, so adding a class is the only step::

    RocketSparkError
    ├── ClientError                    raised by the client before or instead of a server reply
    │   ├── NoNameServerError          10004  no nameserver address configured
    │   ├── NoRouteInfoError           10005  "No route info of this topic" (with the reason)
    │   ├── ConnectError               10001  peer unreachable (retriable)
    │   │   └── TlsError               10011  a TLS handshake failed: names the setting to change
    │   ├── RequestTimeoutError        10002  no reply before the deadline (retriable)
    │   ├── InvalidAddressError        10006  an address that is not host:port
    │   ├── OptionError                10007  an option of the Spark data source
    │   ├── DataLossError              10008  planned offsets are gone (failOnDataLoss)
    │   └── DataCorruptedError         9103   a pulled record failed its CRC
    ├── ConfigError                    10009  a configuration key or value (also a ValueError)
    ├── ClusterError                   10010  a LocalCluster server failed (also a RuntimeError)
    └── ServerError                    a non-success response code
        ├── SystemError_               1
        ├── SystemBusyError            2      (retriable)
        ├── RequestCodeNotSupported    3
        │   └── ControllerNotEnabledError 3   the nameserver runs no controller
        ├── FlushDiskTimeoutError      10     stored, but not yet flushed to disk
        ├── SlaveNotAvailableError     11     too few in-sync replicas; not stored (retriable)
        ├── FlushSlaveTimeoutError     12     not on enough replicas in time (retriable)
        ├── MessageIllegalError        13
        │   └── MessageTooLargeError   13     body over the size limit
        ├── ServiceNotAvailableError   14     (retriable)
        │   └── StoreWriteError        14     disk full or I/O error: nothing was stored
        ├── NoPermissionError          16     a user lacks a permission: names what is missing
        │   └── AuthenticationError    16     unknown access key, wrong signature, skewed clock
        ├── TopicNotExistError         17
        ├── TopicExistAlreadyError     18
        ├── NotLeaderForQueueError     501    (retriable after a route refresh)
        ├── ControllerFencedEpochError 2000   a stale master epoch (elect, alter, switchover)
        ├── ControllerFencedSyncStateSetEpochError 2001  a stale SyncStateSet epoch
        ├── ControllerInvalidMasterError 2002  not from the group's master
        ├── ControllerInvalidReplicasError 2003  a SyncStateSet without the master or unknown ids
        ├── ControllerInvalidRequestError 2005  e.g. a group registered under another cluster
        ├── ControllerBrokerNotAliveError 2006  a switchover to a silent replica
        ├── ControllerNotLeaderError   2007   no Raft leader right now (retriable)
        ├── ControllerGroupNotExistError 2008  no such replica group
        ├── ControllerNeedRegisterError 2010  a heartbeat from an unregistered replica
        ├── ControllerMasterStillExistError 2011  a switchover to the master itself
        ├── ControllerElectMasterFailedError 2012  a switchover to a replica not in the SyncStateSet
        ├── ControllerReplicaIdInvalidError 2014  a replica id or address claimed twice
        ├── InvalidParameterError      9100
        │   ├── IllegalTopicNameError  9100
        │   └── IllegalFilterExpressionError 23  an SQL92 filter that does not parse: where, and why
        ├── MalformedRequestError      9101
        ├── BrokerNotExistError        9102
        ├── MappingStaleError          9104   (retriable after a route refresh)
        ├── StoreDamagedError          9105   a record the commit log lost to damage
        │   └── QueueRebuiltError      9105   an index entry disagreed; rebuilt (retriable)
        ├── NotMasterError             9106   not (surely) the group's master (retriable)
        ├── NameserverNotReadyError    9110   restarted, not yet heard from every broker (retriable)
        ├── ProducerFencedError        9107   an idempotent producer's epoch went backwards
        └── SubscriptionRefusedError   9108   a route subscription not (all) kept: no push stream, or the cap

Translation happens in two places only: the server turns an exception into a response in
``rocketspark.remoting.server``; the client turns a response or a ``grpc.RpcError`` into
one of these in ``rocketspark.remoting.client``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from rocketspark.protocol.codes import ClientErrorCode, ResponseCode


class RocketSparkError(Exception):
    """Base of every rocketspark error."""

    code: ClassVar[int] = int(ResponseCode.SYSTEM_ERROR)
    retriable: ClassVar[bool] = False
    # details a server sends with the error, in its response's ext (msgpack-able values), and
    # the client puts back into ``details``: what a caller needs besides the message
    wire_details: ClassVar[tuple[str, ...]] = ()

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details


class ClientError(RocketSparkError):
    """Raised by the client itself: configuration, connectivity, validation of replies."""


class NoNameServerError(ClientError):
    code = int(ClientErrorCode.NO_NAME_SERVER)


class NoRouteInfoError(ClientError):
    code = int(ClientErrorCode.NOT_FOUND_TOPIC)


class ConnectError(ClientError):
    code = int(ClientErrorCode.CONNECT_BROKER_EXCEPTION)
    retriable = True


class TlsError(ConnectError):
    """A connection failed in its TLS handshake: one side without TLS, a certificate from a
    CA the other does not trust, or mutual TLS without a client certificate. Retrying does not
    help; the message says which setting to change."""

    code = int(ClientErrorCode.TLS_FAILED)
    retriable = False


class RequestTimeoutError(ClientError):
    code = int(ClientErrorCode.ACCESS_BROKER_TIMEOUT)
    retriable = True


class InvalidAddressError(ClientError):
    code = int(ClientErrorCode.INVALID_ADDRESS)


class OptionError(ClientError):
    """An option of the rocketmq data source is missing, unknown or has a bad value."""

    code = int(ClientErrorCode.INVALID_OPTION)


class DataLossError(ClientError):
    """Planned offsets are gone (retention, deletion or a lost broker); see failOnDataLoss."""

    code = int(ClientErrorCode.DATA_LOSS)


class DataCorruptedError(ClientError):
    code = int(ResponseCode.DATA_CORRUPTED)


class ConfigError(RocketSparkError, ValueError):
    """A configuration file or value is wrong; the message says which key and why."""

    code = int(ClientErrorCode.INVALID_CONFIG)


class ClusterError(RocketSparkError, RuntimeError):
    """A server of a local cluster failed to start or stop, or a LocalCluster method was used
    in a way it does not support; the message says which and why."""

    code = int(ClientErrorCode.CLUSTER_FAILED)


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


class ControllerNotEnabledError(RequestCodeNotSupported):
    """A controller request reached a nameserver started without ``controller_enable``."""


class ControllerFencedEpochError(ServerError):
    """The request names a master epoch that is no longer the group's: another election or
    switchover won. Re-read the group and decide again."""

    code = int(ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH)


class ControllerFencedSyncStateSetEpochError(ServerError):
    code = int(ResponseCode.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH)


class ControllerInvalidMasterError(ServerError):
    """Only the group's current master may change its SyncStateSet."""

    code = int(ResponseCode.CONTROLLER_INVALID_MASTER)


class ControllerInvalidReplicasError(ServerError):
    code = int(ResponseCode.CONTROLLER_INVALID_REPLICAS)


class ControllerInvalidRequestError(ServerError):
    code = int(ResponseCode.CONTROLLER_INVALID_REQUEST)


class ControllerBrokerNotAliveError(ServerError):
    code = int(ResponseCode.CONTROLLER_BROKER_NOT_ALIVE)


class ControllerNotLeaderError(ServerError):
    """The controller's Raft group has no leader right now (an election is under way, or too
    few nameservers are up), or its leader did not commit in time. Retry shortly."""

    code = int(ResponseCode.CONTROLLER_NOT_LEADER)
    retriable = True


class ControllerGroupNotExistError(ServerError):
    code = int(ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST)


class ControllerNeedRegisterError(ServerError):
    """A heartbeat from a replica the controller has not registered (at that address): the
    broker registers (CONTROLLER_REGISTER_BROKER) and beats again."""

    code = int(ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED)


class ControllerMasterStillExistError(ServerError):
    code = int(ResponseCode.CONTROLLER_MASTER_STILL_EXIST)


class ControllerElectMasterFailedError(ServerError):
    code = int(ResponseCode.CONTROLLER_ELECT_MASTER_FAILED)


class ControllerReplicaIdInvalidError(ServerError):
    """Two processes claim one replica id of a group, or one address two ids."""

    code = int(ResponseCode.CONTROLLER_BROKER_ID_INVALID)


def _all_subclasses(cls: type[RocketSparkError]) -> list[type[RocketSparkError]]:
    out: list[type[RocketSparkError]] = []
    for sub in cls.__subclasses__():
        out.append(sub)
        out.extend(_all_subclasses(sub))
    return out


def _build_tables() -> tuple[dict[int, type[ServerError]], dict[str, type[RocketSparkError]]]:
    by_code: dict[int, type[ServerError]] = {}
    for cls in _all_subclasses(ServerError):
        # The most general class of a code wins; subclasses sharing it are chosen by name.
        by_code.setdefault(cls.code, cls)  # type: ignore[arg-type]
    by_name = {cls.__name__: cls for cls in _all_subclasses(RocketSparkError)}
    return by_code, by_name


_BY_CODE, _BY_NAME = _build_tables()


def error_for_response(
    code: int, remark: str, error_name: str | None = None, ext: dict[str, Any] | None = None
) -> RocketSparkError:
    """The exception a client raises for a non-success response.

    ``error_name`` is the server's exception class name (sent in the response's ext); it picks
    a more specific subclass of the code's class when there is one. The class's
    ``wire_details`` found in ``ext`` become the error's ``details``.
    """
    base: type[RocketSparkError] = _BY_CODE.get(code, ServerError)
    if error_name:
        named = _BY_NAME.get(error_name)
        if named is not None and issubclass(named, base) and named.code == code:
            base = named
    found = ext or {}
    err = base(
        remark or f"request failed with response code {code}",
        **{key: found[key] for key in base.wire_details if key in found},
    )
    if base is ServerError:
        err.details["code"] = code
    return err


def wire_details(exc: RocketSparkError) -> dict[str, Any]:
    """What of ``exc``'s details a server sends in its response's ext."""
    return {key: exc.details[key] for key in type(exc).wire_details if key in exc.details}
