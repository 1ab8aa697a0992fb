"""Request and response code tables of the wire protocol.

Numbers follow Apache RocketMQ's ``RequestCode`` / ``ResponseCode`` tables wherever RocketMQ
has the same operation, so an operator who knows ``mqadmin`` recognises them in logs and
counters. Codes RocketMQ never had are ours and live in the 9000 range; they are marked
``(ours)`` below. This module is the one table of every code on the wire.

Requests (``RequestCode``)

====  ===================================  =============================================
code  name                                 served by
====  ===================================  =============================================
10    SEND_MESSAGE                         broker
11    PULL_MESSAGE                         broker
12    QUERY_MESSAGE                        broker (messages of a topic by key: the key index)
14    QUERY_CONSUMER_OFFSET                broker
15    UPDATE_CONSUMER_OFFSET               broker
17    UPDATE_AND_CREATE_TOPIC              broker
21    GET_ALL_TOPIC_CONFIG                 broker
25    UPDATE_BROKER_CONFIG                 broker (only ``brokerPermission`` may change)
28    GET_BROKER_RUNTIME_INFO              broker
29    SEARCH_OFFSET_BY_TIMESTAMP           broker
30    GET_MAX_OFFSET                       broker
31    GET_MIN_OFFSET                       broker
33    VIEW_MESSAGE_BY_ID                   broker (the message at a log offset and place)
34    HEART_BEAT                           broker
35    UNREGISTER_CLIENT                    broker
38    GET_CONSUMER_LIST_BY_GROUP           broker
41    LOCK_BATCH_MQ                        broker (a group member's lock on one queue)
42    UNLOCK_BATCH_MQ                      broker
43    GET_ALL_CONSUMER_OFFSET              broker (every group's offsets and members)
103   REGISTER_BROKER                      nameserver
104   UNREGISTER_BROKER                    nameserver
105   GET_ROUTEINFO_BY_TOPIC               nameserver
106   GET_BROKER_CLUSTER_INFO              nameserver
322   QUERY_DATA_VERSION                   nameserver (a broker asks: do you hold my registration?)
202   GET_TOPIC_STATS_INFO                 broker
203   GET_CONSUMER_CONNECTION_LIST         broker (a consumer group's clients: address, language...)
204   GET_PRODUCER_CONNECTION_LIST         broker (a producer group's clients)
206   GET_ALL_TOPIC_LIST_FROM_NAMESERVER   nameserver
205   WIPE_WRITE_PERM_OF_BROKER            nameserver
215   DELETE_TOPIC_IN_BROKER               broker
222   INVOKE_BROKER_TO_RESET_OFFSET        broker (a group's reset offsets, for its consumers)
216   DELETE_TOPIC_IN_NAMESRV              nameserver
320   SEND_BATCH_MESSAGE                   broker
327   ADD_WRITE_PERM_OF_BROKER             nameserver
328   GET_ALL_PRODUCER_INFO                broker (every producer group and its clients)
351   GET_TOPIC_CONFIG                     broker (config, and the mapping of a static topic)
513   UPDATE_AND_CREATE_STATIC_TOPIC       broker
904   BROKER_HEARTBEAT                     controller: a replica's heartbeat (its offset)
1001  CONTROLLER_ALTER_SYNC_STATE_SET      controller: the master's new SyncStateSet
1002  CONTROLLER_ELECT_MASTER              controller: a planned switchover
1003  CONTROLLER_REGISTER_BROKER           controller: a replica joins its group
1004  CONTROLLER_GET_REPLICA_INFO          controller: one replica group's view
1005  CONTROLLER_GET_METADATA_INFO         controller: the Raft leader and peers
1006  CONTROLLER_GET_SYNC_STATE_DATA       controller: every (or the named) group's view
9001  GET_COUNTERS (ours)                  broker and nameserver
9002  OPEN_PUSH_STREAM (ours)              nameserver: push route changes on this connection
9003  SEAL_LOGIC_QUEUES (ours)             broker: close leader segments before a remap
9004  SUBSCRIBE_TOPIC_ROUTE (ours)         nameserver: push me changes of these topics
9005  UNSUBSCRIBE_TOPIC_ROUTE (ours)       nameserver
9006  NOTIFY_CLIENT_TOPIC_ROUTE_CHANGED    nameserver -> client, oneway on its connection (ours;
      (ours)                               RocketMQ's proposal #3870 was never merged)
9007  STOP_STREAM (ours)                   broker: end a streaming pull (its opaque in streamOpaque)
9021  HA_GET_EPOCHS (ours)                 master: its epoch file, for a rejoining replica
9022  HA_GET_METADATA (ours)               master: topics, mappings, offsets, producers
9031  AUTH_GET_TABLE (ours)                broker and nameserver: the users and policies
9032  AUTH_PUT_TABLE (ours)                broker and nameserver: a newer table of them
====  ===================================  =============================================

Responses (``ResponseCode``): see the enum; 9100+ are ours.

"controller" is the replica-group controller inside the nameservers (``nameserver.controller``);
it answers only where ``controller_enable`` is set.
"""

from __future__ import annotations

from enum import IntEnum


class RequestCode(IntEnum):
    """What a request asks for; the ``code`` field of a request command."""

    SEND_MESSAGE = 10
    PULL_MESSAGE = 11
    QUERY_MESSAGE = 12
    QUERY_CONSUMER_OFFSET = 14
    UPDATE_CONSUMER_OFFSET = 15
    UPDATE_AND_CREATE_TOPIC = 17
    GET_ALL_TOPIC_CONFIG = 21
    UPDATE_BROKER_CONFIG = 25
    GET_BROKER_RUNTIME_INFO = 28
    SEARCH_OFFSET_BY_TIMESTAMP = 29
    GET_MAX_OFFSET = 30
    GET_MIN_OFFSET = 31
    VIEW_MESSAGE_BY_ID = 33
    HEART_BEAT = 34
    UNREGISTER_CLIENT = 35
    GET_CONSUMER_LIST_BY_GROUP = 38
    LOCK_BATCH_MQ = 41
    UNLOCK_BATCH_MQ = 42
    GET_ALL_CONSUMER_OFFSET = 43
    REGISTER_BROKER = 103
    UNREGISTER_BROKER = 104
    GET_ROUTEINFO_BY_TOPIC = 105
    GET_BROKER_CLUSTER_INFO = 106
    GET_TOPIC_STATS_INFO = 202
    GET_CONSUMER_CONNECTION_LIST = 203
    GET_PRODUCER_CONNECTION_LIST = 204
    GET_ALL_TOPIC_LIST_FROM_NAMESERVER = 206
    WIPE_WRITE_PERM_OF_BROKER = 205
    DELETE_TOPIC_IN_BROKER = 215
    INVOKE_BROKER_TO_RESET_OFFSET = 222
    DELETE_TOPIC_IN_NAMESRV = 216
    SEND_BATCH_MESSAGE = 320
    QUERY_DATA_VERSION = 322
    ADD_WRITE_PERM_OF_BROKER = 327
    GET_ALL_PRODUCER_INFO = 328
    GET_TOPIC_CONFIG = 351
    UPDATE_AND_CREATE_STATIC_TOPIC = 513
    BROKER_HEARTBEAT = 904
    CONTROLLER_ALTER_SYNC_STATE_SET = 1001
    CONTROLLER_ELECT_MASTER = 1002
    CONTROLLER_REGISTER_BROKER = 1003
    CONTROLLER_GET_REPLICA_INFO = 1004
    CONTROLLER_GET_METADATA_INFO = 1005
    CONTROLLER_GET_SYNC_STATE_DATA = 1006
    GET_COUNTERS = 9001
    OPEN_PUSH_STREAM = 9002
    SEAL_LOGIC_QUEUES = 9003
    SUBSCRIBE_TOPIC_ROUTE = 9004
    UNSUBSCRIBE_TOPIC_ROUTE = 9005
    NOTIFY_CLIENT_TOPIC_ROUTE_CHANGED = 9006
    STOP_STREAM = 9007
    HA_GET_EPOCHS = 9021
    HA_GET_METADATA = 9022
    AUTH_GET_TABLE = 9031
    AUTH_PUT_TABLE = 9032


class ResponseCode(IntEnum):
    """Outcome of a request; the ``code`` field of a response command."""

    SUCCESS = 0
    SYSTEM_ERROR = 1
    SYSTEM_BUSY = 2
    REQUEST_CODE_NOT_SUPPORTED = 3
    FLUSH_DISK_TIMEOUT = 10
    SLAVE_NOT_AVAILABLE = 11  # too few in-sync replicas to acknowledge a send
    FLUSH_SLAVE_TIMEOUT = 12  # stored on the master, not on enough replicas in time
    MESSAGE_ILLEGAL = 13
    SERVICE_NOT_AVAILABLE = 14
    NO_PERMISSION = 16
    TOPIC_NOT_EXIST = 17
    TOPIC_EXIST_ALREADY = 18
    PULL_NOT_FOUND = 19
    PULL_RETRY_IMMEDIATELY = 20
    PULL_OFFSET_MOVED = 21
    QUERY_NOT_FOUND = 22
    SUBSCRIPTION_PARSE_FAILED = 23  # a subscription's filter expression (SQL92) does not parse
    NOT_LEADER_FOR_QUEUE = 501
    # RocketMQ 5's controller codes (its ResponseCode 2000-2014)
    CONTROLLER_FENCED_MASTER_EPOCH = 2000  # the request's master epoch is not the current one
    CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH = 2001  # nor its SyncStateSet epoch
    CONTROLLER_INVALID_MASTER = 2002  # the request is not from the group's master
    CONTROLLER_INVALID_REPLICAS = 2003  # a SyncStateSet without the master, or with unknown replicas
    CONTROLLER_INVALID_REQUEST = 2005
    CONTROLLER_BROKER_NOT_ALIVE = 2006
    CONTROLLER_NOT_LEADER = 2007  # no Raft leader (or no answer from it) right now
    CONTROLLER_BROKER_METADATA_NOT_EXIST = 2008  # no such replica group
    CONTROLLER_BROKER_NEED_TO_BE_REGISTERED = 2010
    CONTROLLER_MASTER_STILL_EXIST = 2011
    CONTROLLER_ELECT_MASTER_FAILED = 2012
    CONTROLLER_BROKER_ID_INVALID = 2014  # a replica id or address claimed twice
    # Ours: RocketMQ reports these as SYSTEM_ERROR with a remark; we give them codes so a
    # client can tell a bad request from a server fault without parsing text.
    INVALID_PARAMETER = 9100
    MALFORMED_REQUEST = 9101
    BROKER_NOT_EXIST = 9102
    DATA_CORRUPTED = 9103
    MAPPING_STALE = 9104  # the request's view of a static topic's mapping is out of date
    STORE_DAMAGED = 9105  # a record is damaged or its index entry disagreed with it
    PRODUCER_FENCED = 9107  # an idempotent producer's epoch went backwards
    NOT_MASTER = 9106  # a write reached a replica that is not (or no longer surely) its group's master
    SUBSCRIPTION_REFUSED = 9108  # a route subscription not (all) kept: no open push stream, or over the cap
    NAMESERVER_NOT_READY = 9110  # restarted, and not yet heard from every broker: cannot say a topic is missing


class ClientErrorCode(IntEnum):
    """Codes of errors the client raises itself, never sent by a server (RocketMQ's
    ``ClientErrorCode`` numbers where it has one)."""

    CONNECT_BROKER_EXCEPTION = 10001  # ConnectError: a peer unreachable
    ACCESS_BROKER_TIMEOUT = 10002  # RequestTimeoutError
    NO_NAME_SERVER = 10004  # NoNameServerError
    NOT_FOUND_TOPIC = 10005  # NoRouteInfoError
    INVALID_ADDRESS = 10006  # InvalidAddressError (ours from here on)
    INVALID_OPTION = 10007  # OptionError: an option of the Spark data source
    DATA_LOSS = 10008  # DataLossError: planned offsets are gone (failOnDataLoss)
    INVALID_CONFIG = 10009  # ConfigError: a server's or cluster's configuration
    CLUSTER_FAILED = 10010  # ClusterError: a server of a LocalCluster did not start or stop
    TLS_FAILED = 10011  # TlsError: a TLS handshake failed (plaintext against TLS, an untrusted certificate)


class Flag:
    """Bits of the ``flag`` field, as in RocketMQ's RemotingCommand."""

    RESPONSE = 0b01
    ONEWAY = 0b10
    MORE = 0b100  # ours: one response of several to a streaming request; the last has it clear
