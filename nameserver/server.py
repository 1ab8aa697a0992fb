"""The nameserver process: route table + handlers on a gRPC server, plus the liveness scan."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Callable
from typing import Any

from grpc import aio

from nameserver.config import NameServerConfig
from nameserver.routes import RouteTable
from rocketspark.errors import BrokerNotExistError, MalformedRequestError, TopicNotExistError
from rocketspark.protocol.codec import pack, unpack
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.headers import get_str
from rocketspark.remoting.server import Dispatcher
from rocketspark.remoting.server import create_server as bind_server

log = logging.getLogger("nameserver")


class NameServer:
    def __init__(self, config: NameServerConfig) -> None:
        self.config = config
        self.routes = RouteTable(config.broker_expired_ms)
        self.dispatcher = Dispatcher("nameserver")
        self.address = ""
        self.dropped_brokers = 0
        self._register_handlers()

    def _register_handlers(self) -> None:
        d = self.dispatcher
        d.register(RequestCode.REGISTER_BROKER, self.register_broker)
        d.register(RequestCode.UNREGISTER_BROKER, self.unregister_broker)
        d.register(RequestCode.GET_ROUTEINFO_BY_TOPIC, self.route)
        d.register(RequestCode.GET_BROKER_CLUSTER_INFO, self.cluster_info)
        d.register(RequestCode.DELETE_TOPIC_IN_NAMESRV, self.delete_topic)
        d.register(RequestCode.WIPE_WRITE_PERM_OF_BROKER, self.wipe_write_perm)
        d.register(RequestCode.ADD_WRITE_PERM_OF_BROKER, self.add_write_perm)
        d.register(RequestCode.GET_COUNTERS, self.counters)
        d.register(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, self.topic_list)

    async def register_broker(self, cmd: RemotingCommand) -> RemotingCommand:
        registration = unpack(cmd.body)
        if not isinstance(registration, dict) or not {"broker", "cluster", "addr"} <= set(registration):
            raise MalformedRequestError("REGISTER_BROKER body must be a map with broker, cluster and addr")
        if registration["broker"] not in self.routes.brokers:
            log.info("broker %s registered from %s", registration["broker"], registration["addr"])
        self.routes.register(registration)
        return cmd.response()

    async def unregister_broker(self, cmd: RemotingCommand) -> RemotingCommand:
        name = get_str(cmd, "brokerName")
        if self.routes.unregister(name) or name not in self.routes.brokers:
            log.info("broker %s unregistered", name)
        return cmd.response()

    async def route(self, cmd: RemotingCommand) -> RemotingCommand:
        topic = get_str(cmd, "topic")
        route = self.routes.route(topic)
        if route is None:
            raise TopicNotExistError(f"No topic route info in name server for the topic: {topic}")
        return cmd.response(body=pack(route.to_wire()))

    async def topic_list(self, cmd: RemotingCommand) -> RemotingCommand:
        return cmd.response(body=pack(sorted(self.routes.topic_queues)))

    async def cluster_info(self, cmd: RemotingCommand) -> RemotingCommand:
        return cmd.response(body=pack(self.routes.cluster_info()))

    async def delete_topic(self, cmd: RemotingCommand) -> RemotingCommand:
        existed = self.routes.delete_topic(get_str(cmd, "topic"))
        return cmd.response(ext={"existed": existed})

    async def wipe_write_perm(self, cmd: RemotingCommand) -> RemotingCommand:
        return self._set_write_perm(cmd, writable=False)

    async def add_write_perm(self, cmd: RemotingCommand) -> RemotingCommand:
        return self._set_write_perm(cmd, writable=True)

    def _set_write_perm(self, cmd: RemotingCommand, *, writable: bool) -> RemotingCommand:
        name = get_str(cmd, "brokerName")
        if name not in self.routes.brokers:
            raise BrokerNotExistError(f'broker "{name}" is not registered with this nameserver')
        count = self.routes.set_write_perm(name, writable)
        return cmd.response(ext={"topics": count})

    async def counters(self, cmd: RemotingCommand) -> RemotingCommand:
        return cmd.response(body=pack(self.counter_values()))

    def counter_values(self) -> dict[str, Any]:
        return {
            "requests": {str(code): n for code, n in sorted(self.dispatcher.counters.items())},
            "brokers": len(self.routes.brokers),
            "topics": len(self.routes.topic_queues),
            "droppedBrokers": self.dropped_brokers,
        }

    async def scan_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.scan_interval_ms / 1000)
            for name in self.routes.scan_inactive():
                self.dropped_brokers += 1
                log.warning("broker %s dropped: silent for more than %d ms", name, self.config.broker_expired_ms)


def create_server(config: NameServerConfig) -> tuple[aio.Server, int, NameServer]:
    """Bind (not start) a nameserver; call inside the event loop. Port 0 picks a free port."""
    nameserver = NameServer(config)
    server, port = bind_server(nameserver.dispatcher, config.listen_host, config.listen_port)
    nameserver.address = f"{config.listen_host}:{port}"
    return server, port, nameserver


async def start(server: aio.Server, nameserver: NameServer) -> list[asyncio.Task[None]]:
    await server.start()
    return [asyncio.create_task(nameserver.scan_loop())]


async def stop(server: aio.Server, nameserver: NameServer, tasks: list[asyncio.Task[None]]) -> None:
    for task in tasks:
        task.cancel()
    await server.stop(grace=1)
    log.info("nameserver %s stopped cleanly", nameserver.address)


async def serve(server: aio.Server, nameserver: NameServer, *, ready: Callable[[str], None] | None = None) -> None:
    """Run until SIGTERM/SIGINT, then stop."""
    stop_event = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):  # before the readiness line, so no signal is missed
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop_event.set)
    tasks = await start(server, nameserver)
    if ready is not None:
        ready(nameserver.address)
    await stop_event.wait()
    await stop(server, nameserver, tasks)
