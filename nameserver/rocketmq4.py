"""The nameserver's answers to RocketMQ 4.x clients and tools: routes and the cluster, as
Apache RocketMQ's nameserver writes them (``rocketspark.rocketmq4.route``).

Each request is translated into ours and served by our own handler (readiness after a
restart, the controller's view of masters, permissions), then written in RocketMQ's JSON.
"""

from __future__ import annotations

from rocketspark.errors import MalformedRequestError
from rocketspark.protocol.bodies import unpack
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.types import BrokerData, TopicRouteData
from rocketspark.remoting.server import Dispatcher
from rocketspark.rocketmq4.codes import Code
from rocketspark.rocketmq4.route import cluster_json, route_json


def register(dispatcher: Dispatcher) -> None:
    async def route(request: RemotingCommand) -> RemotingCommand:
        topic = request.ext.get("topic")
        if not topic:
            raise MalformedRequestError('GET_ROUTEINFO_BY_TOPIC needs a "topic" header field')
        ours = RemotingCommand(RequestCode.GET_ROUTEINFO_BY_TOPIC, ext={"topic": topic})
        answer = await dispatcher.serve_translated(ours, request.user)
        return request.response(body=route_json(TopicRouteData.from_wire(unpack(answer.body))))

    async def cluster(request: RemotingCommand) -> RemotingCommand:
        ours = RemotingCommand(RequestCode.GET_BROKER_CLUSTER_INFO)
        info = unpack((await dispatcher.serve_translated(ours, request.user)).body)
        brokers = [
            BrokerData(entry["cluster"], name, entry.get("addr", ""), tuple(entry.get("replicas", ())))
            for name, entry in sorted(info["brokers"].items())
        ]
        return request.response(body=cluster_json(brokers))

    dispatcher.register_rocketmq(Code.GET_ROUTEINFO_BY_TOPIC, route)
    dispatcher.register_rocketmq(Code.GET_BROKER_CLUSTER_INFO, cluster)
