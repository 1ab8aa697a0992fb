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
        ├── MessageNotFoundError       22     no stored message matches a look-up by id
        ├── ServiceNotAvailableError   14     (retriable)
        │   └── StoreWriteError        14     disk full or I/O error: nothing was stored
        │       └── DiskFullError      14     over disk_refuse_writes_ratio: sends refused
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

The classes live in ``base`` (the root), ``client`` (raised on this side), ``server`` (a
broker's or a nameserver's answers) and ``controller`` (the replica-group controller's); the
table and the translations in ``table``. Import them from here: ``rocketspark.errors`` is the
hierarchy's one public name.
"""

from __future__ import annotations

from rocketspark.errors.base import RocketSparkError
from rocketspark.errors.client import (
    ClientError,
    ClusterError,
    ConfigError,
    ConnectError,
    DataCorruptedError,
    DataLossError,
    InvalidAddressError,
    NoNameServerError,
    NoRouteInfoError,
    OptionError,
    RequestTimeoutError,
    TlsError,
)
from rocketspark.errors.controller import (
    ControllerBrokerNotAliveError,
    ControllerElectMasterFailedError,
    ControllerFencedEpochError,
    ControllerFencedSyncStateSetEpochError,
    ControllerGroupNotExistError,
    ControllerInvalidMasterError,
    ControllerInvalidReplicasError,
    ControllerInvalidRequestError,
    ControllerMasterStillExistError,
    ControllerNeedRegisterError,
    ControllerNotEnabledError,
    ControllerNotLeaderError,
    ControllerReplicaIdInvalidError,
)
from rocketspark.errors.server import (
    AuthenticationError,
    BrokerNotExistError,
    DiskFullError,
    FlushDiskTimeoutError,
    FlushSlaveTimeoutError,
    IllegalFilterExpressionError,
    IllegalTopicNameError,
    InvalidParameterError,
    MalformedRequestError,
    MappingStaleError,
    MessageIllegalError,
    MessageNotFoundError,
    MessageTooLargeError,
    NameserverNotReadyError,
    NoPermissionError,
    NotLeaderForQueueError,
    NotMasterError,
    ProducerFencedError,
    QueueRebuiltError,
    RequestCodeNotSupported,
    ServerError,
    ServiceNotAvailableError,
    SlaveNotAvailableError,
    StoreDamagedError,
    StoreWriteError,
    SubscriptionRefusedError,
    SystemBusyError,
    SystemError_,
    TopicExistAlreadyError,
    TopicNotExistError,
)
from rocketspark.errors.table import CodeTable, wire_details

__all__ = [
    "AuthenticationError",
    "BrokerNotExistError",
    "ClientError",
    "ClusterError",
    "ConfigError",
    "ConnectError",
    "ControllerBrokerNotAliveError",
    "ControllerElectMasterFailedError",
    "ControllerFencedEpochError",
    "ControllerFencedSyncStateSetEpochError",
    "ControllerGroupNotExistError",
    "ControllerInvalidMasterError",
    "ControllerInvalidReplicasError",
    "ControllerInvalidRequestError",
    "ControllerMasterStillExistError",
    "ControllerNeedRegisterError",
    "ControllerNotEnabledError",
    "ControllerNotLeaderError",
    "ControllerReplicaIdInvalidError",
    "DataCorruptedError",
    "DataLossError",
    "DiskFullError",
    "FlushDiskTimeoutError",
    "FlushSlaveTimeoutError",
    "IllegalFilterExpressionError",
    "IllegalTopicNameError",
    "InvalidAddressError",
    "InvalidParameterError",
    "MalformedRequestError",
    "MappingStaleError",
    "MessageIllegalError",
    "MessageNotFoundError",
    "MessageTooLargeError",
    "NameserverNotReadyError",
    "NoNameServerError",
    "NoPermissionError",
    "NoRouteInfoError",
    "NotLeaderForQueueError",
    "NotMasterError",
    "OptionError",
    "ProducerFencedError",
    "QueueRebuiltError",
    "RequestCodeNotSupported",
    "RequestTimeoutError",
    "RocketSparkError",
    "ServerError",
    "ServiceNotAvailableError",
    "SlaveNotAvailableError",
    "StoreDamagedError",
    "StoreWriteError",
    "SubscriptionRefusedError",
    "SystemBusyError",
    "SystemError_",
    "TlsError",
    "TopicExistAlreadyError",
    "TopicNotExistError",
    "error_for_response",
    "wire_details",
]

_TABLE = CodeTable(RocketSparkError, ServerError)  # after every class is imported
error_for_response = _TABLE.error_for_response

# Every class is public as rocketspark.errors.<name>, wherever it is defined, as before the
# hierarchy was split into modules: tracebacks and pickles (a Spark task's error) name it so.
for _cls in (RocketSparkError, *_TABLE.by_name.values()):
    _cls.__module__ = __name__
