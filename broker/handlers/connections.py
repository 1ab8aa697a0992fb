"""Who is connected, for operators: GET_CONSUMER_CONNECTION_LIST (a consumer group's clients),
GET_PRODUCER_CONNECTION_LIST (a producer group's) and GET_ALL_PRODUCER_INFO (every producer
group), answered from the broker's ``connections`` (:mod:`broker.connections`), as RocketMQ's
``mqadmin consumerConnection`` / ``producerConnection`` are. Each answer is this broker's view;
the admin merges the brokers' (``rocketspark.client.connection_admin``).

``heard_ours`` is how our own clients' HEART_BEAT feeds the registry (a 4.x client's, which
the 4.x dialect translates into ours, is noted by the dialect with what only it knows).
"""

from __future__ import annotations

from functools import partial

from broker.connections import OURS, Connections, Subscribed
from rocketspark.protocol.bodies import pack
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.headers import get_str
from rocketspark.remoting import frame
from rocketspark.remoting.server import Dispatcher


def register(dispatcher: Dispatcher, connections: Connections) -> None:
    for code, handler in {
        RequestCode.GET_CONSUMER_CONNECTION_LIST: consumer_connections,
        RequestCode.GET_PRODUCER_CONNECTION_LIST: producer_connections,
        RequestCode.GET_ALL_PRODUCER_INFO: all_producers,
    }.items():
        dispatcher.register(code, partial(handler, connections))


def heard_ours(connections: Connections, cmd: RemotingCommand, client_id: str, group: str, producer: str) -> None:
    """Our client's HEART_BEAT: a group consumer (its topics, each read with its one filter)
    or a producer announcing its group. Not one made inside this broker (no connection of its
    own): that is a 4.x client's, translated (the dialect notes it), or the broker's own."""
    if cmd.channel is None:
        return
    consumers = None
    if group:
        kind, expression = str(cmd.ext.get("expressionType") or "TAG"), str(cmd.ext.get("expression") or "*")
        consumers = {group: [Subscribed(str(t), kind, expression) for t in cmd.ext.get("topics") or ()]}
    connections.heard(
        client_id,
        address=getattr(cmd.channel, "peer", ""),
        language=cmd.language or frame.LANGUAGE,
        version=str(cmd.ext.get("clientVersion") or ""),
        protocol=OURS,
        channel=cmd.channel,
        consumers=consumers,
        producers=[producer] if producer else (),
    )


async def consumer_connections(connections: Connections, cmd: RemotingCommand) -> RemotingCommand:
    group = get_str(cmd, "consumerGroup")
    return cmd.response(body=pack({"connections": connections.consumers_of(group)}))


async def producer_connections(connections: Connections, cmd: RemotingCommand) -> RemotingCommand:
    group = get_str(cmd, "producerGroup")
    return cmd.response(body=pack({"connections": connections.producers_of(group)}))


async def all_producers(connections: Connections, cmd: RemotingCommand) -> RemotingCommand:
    return cmd.response(body=pack({"groups": connections.producer_groups()}))
