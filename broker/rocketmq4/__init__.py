"""The broker's RocketMQ 4.x dialect: what RocketMQ's own clients and tools send a broker, each
request translated into ours and served by our handlers (``Queues``), answered in RocketMQ's
terms. One module per request family, as the broker's own handlers; their wire pieces
(records, routes, header fields, request codes) are ``rocketspark.rocketmq4``.
"""

from __future__ import annotations

from functools import partial

from broker.rocketmq4 import clients, connections, lookup, offsets, pull, send, sendback, transactions
from broker.rocketmq4.context import Dialect
from rocketspark.protocol.codes import RequestCode
from rocketspark.remoting.server import Dispatcher
from rocketspark.rocketmq4.codes import Code


def register(dispatcher: Dispatcher, dialect: Dialect) -> None:
    r = dispatcher.register_rocketmq
    r(Code.SEND_MESSAGE, partial(send.handle_send, dialect, short=False, batch=False))
    r(Code.SEND_MESSAGE_V2, partial(send.handle_send, dialect, short=True, batch=False))
    r(Code.SEND_BATCH_MESSAGE, partial(send.handle_send, dialect, short=True, batch=True))
    r(Code.PULL_MESSAGE, partial(pull.handle_pull, dialect))
    r(Code.HEART_BEAT, partial(clients.handle_heartbeat, dialect))
    r(Code.UNREGISTER_CLIENT, partial(clients.handle_unregister, dialect))
    r(Code.GET_CONSUMER_LIST_BY_GROUP, partial(clients.handle_consumer_list, dialect))
    r(Code.CHECK_CLIENT_CONFIG, partial(clients.handle_check_client_config, dialect))
    r(Code.GET_CONSUMER_CONNECTION_LIST, partial(connections.handle_consumer_connections, dialect))
    r(Code.GET_PRODUCER_CONNECTION_LIST, partial(connections.handle_producer_connections, dialect))
    r(Code.LOCK_BATCH_MQ, partial(clients.handle_lock, dialect, lock=True))
    r(Code.UNLOCK_BATCH_MQ, partial(clients.handle_lock, dialect, lock=False))
    r(Code.QUERY_CONSUMER_OFFSET, partial(offsets.handle_query, dialect))
    r(Code.UPDATE_CONSUMER_OFFSET, partial(offsets.handle_update, dialect))
    r(Code.GET_MAX_OFFSET, partial(offsets.handle_bound, dialect, code=RequestCode.GET_MAX_OFFSET))
    r(Code.GET_MIN_OFFSET, partial(offsets.handle_bound, dialect, code=RequestCode.GET_MIN_OFFSET))
    r(
        Code.SEARCH_OFFSET_BY_TIMESTAMP,
        partial(offsets.handle_bound, dialect, code=RequestCode.SEARCH_OFFSET_BY_TIMESTAMP),
    )
    r(Code.CONSUMER_SEND_MSG_BACK, partial(sendback.handle_send_back, dialect))
    r(Code.END_TRANSACTION, partial(transactions.handle_end, dialect))
    r(Code.QUERY_MESSAGE, partial(lookup.handle_query, dialect))
    r(Code.VIEW_MESSAGE_BY_ID, partial(lookup.handle_view, dialect))
