"""Apache RocketMQ's request codes, as 4.x clients and tools send them (``RequestCode.java``).

The numbers that are also ours (``rocketspark.protocol.codes``) mean the same operation; a
RocketMQ client's request is told apart by its header (JSON or RocketMQ's binary form, never
our msgpack), so the two never mix. ``SERVED`` is the table docs/clients/rocketmq4.md prints: what a 4.x client
gets answered, and by whom. Any other code is answered REQUEST_CODE_NOT_SUPPORTED with a remark
naming it (``NAMES`` knows RocketMQ's names of the common ones).
"""

from __future__ import annotations

from enum import IntEnum
from typing import Final


class Code(IntEnum):
    SEND_MESSAGE = 10
    PULL_MESSAGE = 11
    QUERY_MESSAGE = 12
    QUERY_CONSUMER_OFFSET = 14
    UPDATE_CONSUMER_OFFSET = 15
    SEARCH_OFFSET_BY_TIMESTAMP = 29
    GET_MAX_OFFSET = 30
    GET_MIN_OFFSET = 31
    VIEW_MESSAGE_BY_ID = 33
    HEART_BEAT = 34
    UNREGISTER_CLIENT = 35
    CONSUMER_SEND_MSG_BACK = 36
    END_TRANSACTION = 37
    GET_CONSUMER_LIST_BY_GROUP = 38
    CHECK_TRANSACTION_STATE = 39  # broker -> producer
    NOTIFY_CONSUMER_IDS_CHANGED = 40  # broker -> consumer
    LOCK_BATCH_MQ = 41
    UNLOCK_BATCH_MQ = 42
    CHECK_CLIENT_CONFIG = 46
    GET_ROUTEINFO_BY_TOPIC = 105
    GET_BROKER_CLUSTER_INFO = 106
    GET_CONSUMER_CONNECTION_LIST = 203
    GET_PRODUCER_CONNECTION_LIST = 204
    SEND_MESSAGE_V2 = 310
    SEND_BATCH_MESSAGE = 320


# code -> (served by, what) for the table of docs/clients/rocketmq4.md
SERVED: Final[dict[Code, tuple[str, str]]] = {
    Code.GET_ROUTEINFO_BY_TOPIC: ("nameserver", "TopicRouteData; a static topic's logical queues as one broker's"),
    Code.GET_BROKER_CLUSTER_INFO: ("nameserver", "ClusterInfo: brokers by cluster, addresses by broker id"),
    Code.SEND_MESSAGE: ("broker", "one message (long field names: the Go client)"),
    Code.SEND_MESSAGE_V2: ("broker", "one message (short field names: Java, ali-ons)"),
    Code.SEND_BATCH_MESSAGE: ("broker", "messages of one queue, stored as one batch"),
    Code.PULL_MESSAGE: ("broker", "MessageExt records; long polling; tag and SQL92 filters"),
    Code.QUERY_MESSAGE: ("broker", "messages by key, or by client id (UNIQ_KEY)"),
    Code.VIEW_MESSAGE_BY_ID: ("broker", "the message at a physical offset (an offset message id)"),
    Code.QUERY_CONSUMER_OFFSET: ("broker", "a group's committed offset"),
    Code.UPDATE_CONSUMER_OFFSET: ("broker", "commit a group's offset"),
    Code.GET_MAX_OFFSET: ("broker", "a queue's end"),
    Code.GET_MIN_OFFSET: ("broker", "a queue's first stored offset"),
    Code.SEARCH_OFFSET_BY_TIMESTAMP: ("broker", "the first offset stored at or after a time"),
    Code.HEART_BEAT: ("broker", "producer and consumer groups; creates %RETRY%/%DLQ% topics"),
    Code.UNREGISTER_CLIENT: ("broker", "a client leaves its groups"),
    Code.GET_CONSUMER_LIST_BY_GROUP: ("broker", "a group's live members (for rebalance)"),
    Code.NOTIFY_CONSUMER_IDS_CHANGED: ("broker -> client", "pushed when a group's members change"),
    Code.CONSUMER_SEND_MSG_BACK: ("broker", "a failed message to %RETRY%<group>, after the maximum to %DLQ%<group>"),
    Code.END_TRANSACTION: ("broker", "commit or roll back a half message"),
    Code.CHECK_TRANSACTION_STATE: ("broker -> client", "pushed to a producer of a half message left open"),
    Code.CHECK_CLIENT_CONFIG: ("broker", "a consumer's SQL92 subscription compiles"),
    Code.LOCK_BATCH_MQ: ("broker", "orderly consumption: a group member's queue locks"),
    Code.UNLOCK_BATCH_MQ: ("broker", "gives queue locks up"),
    Code.GET_CONSUMER_CONNECTION_LIST: ("broker", "mqadmin consumerConnection: a group's clients, subscriptions"),
    Code.GET_PRODUCER_CONNECTION_LIST: ("broker", "mqadmin producerConnection: a producer group's clients"),
}

NAMES: Final[dict[int, str]] = {
    **{int(c): c.name for c in Code},
    13: "QUERY_BROKER_OFFSET",
    17: "UPDATE_AND_CREATE_TOPIC",
    21: "GET_ALL_TOPIC_CONFIG",
    25: "UPDATE_BROKER_CONFIG",
    26: "GET_BROKER_CONFIG",
    28: "GET_BROKER_RUNTIME_INFO",
    43: "GET_ALL_CONSUMER_OFFSET",
    45: "GET_ALL_DELAY_OFFSET",
    100: "PUT_KV_CONFIG",
    101: "GET_KV_CONFIG",
    102: "DELETE_KV_CONFIG",
    103: "REGISTER_BROKER",
    104: "UNREGISTER_BROKER",
    200: "GET_ALL_SUBSCRIPTIONGROUP_CONFIG",
    201: "GET_ALL_TOPIC_LIST_FROM_NAMESERVER",
    202: "GET_TOPIC_STATS_INFO",
    203: "GET_CONSUMER_CONNECTION_LIST",
    204: "GET_PRODUCER_CONNECTION_LIST",
    205: "WIPE_WRITE_PERM_OF_BROKER",
    206: "GET_ALL_TOPIC_LIST_FROM_NAMESERVER",
    207: "DELETE_SUBSCRIPTIONGROUP",
    208: "GET_CONSUME_STATS",
    215: "DELETE_TOPIC_IN_BROKER",
    216: "DELETE_TOPIC_IN_NAMESRV",
    217: "GET_KVLIST_BY_NAMESPACE",
    220: "RESET_CONSUMER_CLIENT_OFFSET",
    221: "GET_CONSUMER_STATUS_FROM_CLIENT",
    222: "INVOKE_BROKER_TO_RESET_OFFSET",
    223: "INVOKE_BROKER_TO_GET_CONSUMER_STATUS",
    300: "QUERY_TOPIC_CONSUME_BY_WHO",
    301: "GET_TOPICS_BY_CLUSTER",
    307: "GET_CONSUMER_RUNNING_INFO",
    309: "CONSUME_MESSAGE_DIRECTLY",
    318: "CLONE_GROUP_OFFSET",
    319: "VIEW_BROKER_STATS_DATA",
    321: "QUERY_CONSUME_QUEUE",
    322: "QUERY_DATA_VERSION",
    323: "RESUME_CHECK_HALF_MESSAGE",
    324: "SEND_REPLY_MESSAGE",
    325: "SEND_REPLY_MESSAGE_V2",
    326: "PUSH_REPLY_MESSAGE_TO_CLIENT",
    327: "ADD_WRITE_PERM_OF_BROKER",
    351: "GET_TOPIC_CONFIG",
    361: "LITE_PULL_MESSAGE",
    513: "UPDATE_AND_CREATE_STATIC_TOPIC",
}


def name_of(code: int) -> str:
    return f"{NAMES[code]} ({code})" if code in NAMES else f"request code {code}"


def unserved_remark(code: int, server: str, served: list[int]) -> str:
    """What a RocketMQ client is told of a request code nobody here serves."""
    names = ", ".join(NAMES.get(c, str(c)) for c in served)
    return (
        f"{name_of(code)} from a RocketMQ client is not supported by {server}; it serves these RocketMQ requests: "
        f"{names or 'none'} (docs/clients/rocketmq4.md). Administer rocketspark with `rocketspark admin`"
    )
