"""Consumer heartbeats and group membership (what client-side rebalance is computed from)."""

from __future__ import annotations

from broker.consumers import ConsumerGroups
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.headers import get_str
from rocketspark.remoting.server import Dispatcher


def register(dispatcher: Dispatcher, groups: ConsumerGroups) -> None:

    async def heartbeat(cmd: RemotingCommand) -> RemotingCommand:
        group, client_id = get_str(cmd, "consumerGroup"), get_str(cmd, "clientId")
        groups.heartbeat(group, client_id)
        return cmd.response(ext={"members": groups.members(group)})

    async def unregister(cmd: RemotingCommand) -> RemotingCommand:
        group, client_id = get_str(cmd, "consumerGroup"), get_str(cmd, "clientId")
        groups.unregister(group, client_id)
        return cmd.response()

    async def member_list(cmd: RemotingCommand) -> RemotingCommand:
        return cmd.response(ext={"members": groups.members(get_str(cmd, "consumerGroup"))})

    dispatcher.register(RequestCode.HEART_BEAT, heartbeat)
    dispatcher.register(RequestCode.UNREGISTER_CLIENT, unregister)
    dispatcher.register(RequestCode.GET_CONSUMER_LIST_BY_GROUP, member_list)
