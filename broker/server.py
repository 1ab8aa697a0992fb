"""The broker process around a :class:`broker.broker.Broker`: ``create_server`` opens it and
binds its ports; ``start`` serves; ``serve`` runs it until a signal asks it to stop, then
``stop`` stops cleanly: no new requests, nameservers told, store flushed and marked clean.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from broker.broker import Broker
from broker.config import BrokerConfig
from rocketspark.errors import ControllerInvalidRequestError, ControllerReplicaIdInvalidError, RocketSparkError
from rocketspark.remoting.lifecycle import serve_until_signalled
from rocketspark.remoting.listener import Listener, bind

log = logging.getLogger("broker")


def create_server(config: BrokerConfig) -> tuple[Listener, int, Broker]:
    """Bind the broker's port, open its store and bind the gRPC server (not started); port 0
    picks a free port; call inside the event loop. If a port cannot be bound, nothing is left
    open."""
    sock = bind(config.listen_host, config.listen_port, f"broker {config.broker_name}")
    port = sock.getsockname()[1]
    try:
        broker = Broker(config, address=f"{config.advertised_address}:{port}", loop=asyncio.get_running_loop())
        report = broker.open()
    except BaseException:
        sock.close()
        raise
    try:
        for line in report.lines():
            (log.warning if report.damage else log.info)("broker %s: %s", broker.name, line)
        if broker.metrics is not None:
            url = broker.metrics.serve(
                config.listen_host,
                config.metrics_port,
                config.advertised_address,
                broker.security.server_tls,
                config.scrape_access(broker.acl),
            )
            log.info("broker %s: metrics on %s", broker.name, url)
        broker.bind_v2()
    except BaseException:  # a port that cannot be bound: nothing is left open
        sock.close()
        if broker.metrics is not None:
            broker.metrics.close()
        broker.close()
        raise
    return Listener(broker.dispatcher, sock, broker.security.server_tls), port, broker


async def start(server: Listener, broker: Broker) -> list[asyncio.Task[None]]:
    """Start serving and the background work; register with the nameservers once."""
    await server.start()
    if not broker.config.nameservers:
        log.warning(
            "broker %s has no nameserver configured (nameservers in its config or ROCKETSPARK_NAMESRV); "
            "clients will not find it",
            broker.name,
        )
    if broker.controller is not None:
        await broker.replication.start(broker.config.listen_host, broker.config.ha_listen_port)
        try:
            await broker.controller.beat()  # learn this replica's role before serving writes
        except (ControllerReplicaIdInvalidError, ControllerInvalidRequestError):
            await broker.replication.stop()
            await server.stop(grace=0)
            if broker.grpc_server is not None:
                await broker.grpc_server.stop(grace=0)
            if broker.metrics is not None:
                broker.metrics.close()
            broker.close()
            raise  # another replica holds this id, or the group is another cluster's: a config error
        except RocketSparkError as exc:
            log.warning(
                "broker %s replica %d: the controller did not answer yet: %s", broker.name, broker.role.replica_id, exc
            )
    if broker.grpc_server is not None and broker.grpc_endpoint is not None:  # the controller has not refused it
        await broker.grpc_server.start()
        broker.grpc_endpoint.start()
        log.info("broker %s: grpc v2 endpoint ready on %s", broker.name, broker.grpc_address)
    tasks = [asyncio.create_task(t) for t in broker.background_tasks()]
    await broker.registry.register_now()
    return tasks


async def stop(server: Listener, broker: Broker, tasks: list[asyncio.Task[None]]) -> None:
    """Graceful stop: refuse new requests, tell the nameservers, flush and close the store."""
    log.info("broker %s stopping", broker.name)
    for task in tasks:
        task.cancel()
    broker.longpoll.close()
    await broker.replication.stop()
    if broker.grpc_server is not None:
        await broker.grpc_server.stop(grace=1)
    if broker.grpc_endpoint is not None:
        await broker.grpc_endpoint.stop()
    broker.clients.close()
    await server.stop(grace=2)
    await broker.registry.unregister_all()
    if broker.metrics is not None:
        broker.metrics.close()
    broker.close()
    log.info("broker %s stopped cleanly", broker.name)


async def serve(server: Listener, broker: Broker, *, ready: Callable[[str], None] | None = None) -> None:
    """Run until SIGTERM/SIGINT, then stop gracefully."""
    await serve_until_signalled(server, broker, start, stop, ready=ready)
