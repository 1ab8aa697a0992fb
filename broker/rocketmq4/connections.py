"""mqadmin's ``consumerConnection`` and ``producerConnection`` (GET_CONSUMER_CONNECTION_LIST,
GET_PRODUCER_CONNECTION_LIST), answered from the broker's connection registry
(:mod:`broker.connections`) in RocketMQ's JSON: ``ConsumerConnection`` (``connectionSet``,
``subscriptionTable``, ``consumeType``, ``messageModel``, ``consumeFromWhere``) and
``ProducerConnection`` (``connectionSet``). Every client of the group is listed, whatever it
speaks; the JSON's ``version`` is RocketMQ's version ordinal (``Connection.version_code``),
which only a 4.x client has (others: 0). A group nobody is in answers an empty ``connectionSet`` (RocketMQ answers an
error: mqadmin prints nothing either way).
"""

from __future__ import annotations

import json
from typing import Any

from broker.connections import Connection
from broker.rocketmq4.context import Dialect
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.connections import TAG
from rocketspark.rocketmq4.headers import Fields


def _connection(entry: Connection) -> dict[str, Any]:
    return {
        "clientId": entry.client_id,
        "clientAddr": entry.address,
        "language": entry.language,
        "version": entry.version_code,
    }


async def handle_consumer_connections(dialect: Dialect, request: RemotingCommand) -> RemotingCommand:
    group = Fields("GET_CONSUMER_CONNECTION_LIST", request.ext).text("consumerGroup")
    dialect.queues.authorize(RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": group}, request.user)
    clients = dialect.connections.consumers(group)
    table: dict[str, dict[str, Any]] = {}
    for entry in clients:
        for s in entry.consumer_groups[group]:
            tags = [t.strip() for t in s.expression.split("||") if t.strip()] if s.expression_type == TAG else []
            table[s.topic] = {
                "topic": s.topic,
                "subString": s.expression,
                "expressionType": s.expression_type,
                "tagsSet": [t for t in tags if t != "*"],
                "codeSet": [],
                "subVersion": entry.heard_ms,
                "classFilterMode": False,
            }
    body = {
        "connectionSet": [_connection(e) for e in clients],
        "subscriptionTable": table,
        "consumeType": "CONSUME_PASSIVELY",
        "messageModel": "CLUSTERING",
        "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
    }
    return request.response(body=json.dumps(body).encode())


async def handle_producer_connections(dialect: Dialect, request: RemotingCommand) -> RemotingCommand:
    group = Fields("GET_PRODUCER_CONNECTION_LIST", request.ext).text("producerGroup")
    dialect.queues.authorize(RequestCode.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": group}, request.user)
    body = {"connectionSet": [_connection(e) for e in dialect.connections.producers(group)]}
    return request.response(body=json.dumps(body).encode())
