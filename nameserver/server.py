"""The nameserver process: route table + handlers on a gRPC server, plus the liveness scan;
with ``controller_enable``, the replica-group controller (``nameserver.controller``) too."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from nameserver import rocketmq4
from nameserver.config import NameServerConfig
from nameserver.controller.service import SCAN_INTERVAL_MS, Controller, register_disabled
from nameserver.counters import NameServerCounters
from nameserver.metrics import NameServerCollector
from nameserver.notify import RouteNotifier
from nameserver.readiness import Readiness
from nameserver.routes import RouteTable
from rocketspark.errors import BrokerNotExistError, NameserverNotReadyError, TopicNotExistError
from rocketspark.metrics.node import Node, NodeMetrics
from rocketspark.protocol.bodies import pack, unpack
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.headers import get_int, get_list, get_str
from rocketspark.protocol.types import BrokerData
from rocketspark.remoting.lifecycle import every_ms_on_loop, serve_until_signalled
from rocketspark.remoting.listener import Listener, bind
from rocketspark.remoting.server import Dispatcher, PushHub, client_key
from rocketspark.security.service import VERSION_FIELD, serve_acl

log = logging.getLogger("nameserver")


class NameServer:
    """The nameserver's state and handlers. ``address`` is where it listens (known once its
    port is bound); with ``metrics`` its requests are observed and its state collected."""

    def __init__(self, config: NameServerConfig, *, address: str = "", metrics: NodeMetrics | None = None) -> None:
        self.config = config
        self.routes = RouteTable(config.broker_expired_ms)
        self.readiness = Readiness(Path(config.data_dir) if config.data_dir else None, config.startup_wait_ms)
        self.acl = config.acl_store(Path(config.controller_data_dir).parent / "acl.json")
        observer = metrics.requests if metrics is not None else None
        self.dispatcher = Dispatcher("nameserver", guard=config.guard(self.acl), observer=observer)
        self.push = PushHub(on_close=self._push_closed)
        self.notifier = RouteNotifier(
            self.push,
            max_load_per_cpu=config.notify_max_load_per_cpu,
            max_memory_used=config.notify_max_memory_used,
            max_per_client=config.max_subscriptions_per_client,
        )
        self.controller = Controller(config) if config.controller_enable else None
        self._masters: dict[str, tuple[str | None, int]] = {}  # group -> (master, epoch), last seen
        self.address = address
        self.dropped_brokers = 0
        self.counters = NameServerCounters(
            self.dispatcher.counters,
            self.routes,
            self.notifier,
            self.push,
            lambda: self.dropped_brokers,
            lambda: self.metrics.url if self.metrics is not None else "",
        )
        self.metrics = metrics
        if metrics is not None:
            views = self.controller.views if self.controller is not None else None
            metrics.add(NameServerCollector(metrics.families, self.counters, self.dispatcher.guard, views))
        self._register_handlers()

    def _push_closed(self, client_id: str) -> None:
        self.notifier.stream_closed(client_id)  # it subscribes again when it reconnects

    def _register_handlers(self) -> None:
        d = self.dispatcher
        d.register(RequestCode.REGISTER_BROKER, self.register_broker)
        d.register(RequestCode.UNREGISTER_BROKER, self.unregister_broker)
        d.register(RequestCode.QUERY_DATA_VERSION, self.query_data_version)
        d.register(RequestCode.GET_ROUTEINFO_BY_TOPIC, self.route)
        d.register(RequestCode.GET_BROKER_CLUSTER_INFO, self.cluster_info)
        d.register(RequestCode.DELETE_TOPIC_IN_NAMESRV, self.delete_topic)
        d.register(RequestCode.WIPE_WRITE_PERM_OF_BROKER, self.wipe_write_perm)
        d.register(RequestCode.ADD_WRITE_PERM_OF_BROKER, self.add_write_perm)
        d.register(RequestCode.GET_COUNTERS, self.get_counters)
        d.register(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, self.topic_list)
        d.register(RequestCode.SUBSCRIBE_TOPIC_ROUTE, self.subscribe)
        d.register(RequestCode.UNSUBSCRIBE_TOPIC_ROUTE, self.unsubscribe)
        d.register(RequestCode.OPEN_PUSH_STREAM, self.push.register)
        serve_acl(d, self.acl, enabled=self.config.auth_enable)
        rocketmq4.register(d)
        if self.controller is not None:
            self.controller.register(d)
        else:
            register_disabled(d)

    async def register_broker(self, cmd: RemotingCommand) -> RemotingCommand:
        registration = unpack(cmd.body)  # its shape was checked at the edge: shapes.Registration
        if registration["broker"] not in self.routes.brokers:
            log.info("broker %s registered from %s", registration["broker"], registration["addr"])
        changed = self.routes.register(registration)
        self.readiness.registered(registration["broker"])
        self.readiness.serving(self.routes.brokers)
        declared = registration.get("changed")
        named = {str(t) for t in declared} if isinstance(declared, list) else set()
        self.notifier.mark(named)  # topics the broker created or changed: tell their subscribers
        self.notifier.suppress(changed - named)  # the rest is a whole broker (re)registering: hotspot rule
        if not self.config.auth_enable:
            return cmd.response()
        return cmd.response(ext={VERSION_FIELD: self.acl.table.version})  # the broker reconciles the tables

    async def unregister_broker(self, cmd: RemotingCommand) -> RemotingCommand:
        name = get_str(cmd, "brokerName")
        changed = self.routes.unregister(name)
        self.readiness.serving(self.routes.brokers)
        self.notifier.suppress(changed)  # a broker going away does not notify (hotspot rule)
        log.info("broker %s unregistered", name)
        return cmd.response()

    async def query_data_version(self, cmd: RemotingCommand) -> RemotingCommand:
        """A broker's check (every second): ``changed`` unless this nameserver holds its
        registration at its version and address; the broker then registers again at once
        (a restarted nameserver hears from every broker within a second or so)."""
        live = self.routes.brokers.get(get_str(cmd, "brokerName"))
        held = live is not None and live.address == get_str(cmd, "addr") and live.version == get_int(cmd, "version")
        if held:
            assert live is not None
            live.touch()
        return cmd.response(ext={"changed": not held})

    async def route(self, cmd: RemotingCommand) -> RemotingCommand:
        """A topic's route. While a restarted nameserver waits for its brokers, it gives none: a
        missing route may exist, and one it has may lack the queues of a broker not yet back."""
        topic = get_str(cmd, "topic")
        route = self.routes.route(topic)
        if not self.readiness.ready:
            what = f'say whether topic "{topic}" exists' if route is None else f'give all of topic "{topic}"\'s queues'
            raise NameserverNotReadyError(
                f"the nameserver at {self.address} cannot {what}: it restarted "
                f"{self.readiness.uptime_s():.1f} s ago and has not heard again from "
                f"{', '.join(self.readiness.waiting_for())} (at most {self.readiness.ready_in_s():.1f} s more). "
                "Ask another nameserver, or retry in a second"
            )
        if route is None:
            raise TopicNotExistError(f"No topic route info in name server for the topic: {topic}")
        if self.controller is not None:
            route = replace(route, brokers=tuple(self._where(b) for b in route.brokers))
        return cmd.response(body=pack(route.to_wire()))

    def _where(self, broker: BrokerData) -> BrokerData:
        """A replica group's entry as the controller sees it now: the master it elected (the
        registration may still name a dead one) and the live slaves, for reads."""
        assert self.controller is not None
        found = self.controller.addresses(broker.broker_name)
        if found is None:
            return broker
        master, slaves = found
        return replace(broker, address=master, replicas=slaves)

    def watch_masters(self) -> None:
        """A group whose master changed: its topics' subscribers re-read their routes, told
        at once (not at the next notification round, and even under resource pressure):
        producers wait on it."""
        assert self.controller is not None
        masters = self.controller.masters()
        moved = False
        for name, now in masters.items():
            before = self._masters.get(name)
            if before is not None and before != now:
                live = self.routes.brokers.get(name)
                self.notifier.mark(live.topics if live is not None else ())
                moved = True
                log.info("group %s: master now %s (epoch %d); its routes' subscribers are told", name, now[0], now[1])
        self._masters = masters
        if moved:
            self.notifier.scan(urgent=True)

    async def elect_and_watch(self) -> None:
        """The controller's election scan, then (on every node: followers apply elections
        through Raft) the master watch, so that a new master is pushed within one scan."""
        assert self.controller is not None
        await self.controller.scan()
        self.watch_masters()

    async def topic_list(self, cmd: RemotingCommand) -> RemotingCommand:
        return cmd.response(body=pack(sorted(self.routes.topic_queues)))

    async def cluster_info(self, cmd: RemotingCommand) -> RemotingCommand:
        info = self.routes.cluster_info()
        if self.controller is not None:
            for name, entry in info["brokers"].items():
                found = self.controller.addresses(name)
                if found is not None:
                    entry["addr"], entry["replicas"] = found[0], list(found[1])
        return cmd.response(body=pack(info))

    async def delete_topic(self, cmd: RemotingCommand) -> RemotingCommand:
        topic = get_str(cmd, "topic")
        existed = self.routes.delete_topic(topic)
        self.notifier.mark([topic])
        return cmd.response(ext={"existed": existed})

    async def subscribe(self, cmd: RemotingCommand) -> RemotingCommand:
        """Subscriptions are kept only for a client whose push stream is open, up to its cap;
        unless every topic was kept the answer is SUBSCRIPTION_REFUSED, with ``streamOpen``
        and ``refused`` (the topics not kept: the client polls those)."""
        outcome = self.notifier.subscribe(client_key(cmd), [str(t) for t in get_list(cmd, "topics")])
        refusal = outcome.error()
        if refusal is not None:
            raise refusal
        return cmd.response(ext={"streamOpen": True, "refused": []})

    async def unsubscribe(self, cmd: RemotingCommand) -> RemotingCommand:
        topics = get_list(cmd, "topics", None)
        self.notifier.unsubscribe(client_key(cmd), None if topics is None else [str(t) for t in topics])
        return cmd.response()

    async def wipe_write_perm(self, cmd: RemotingCommand) -> RemotingCommand:
        return self._set_write_perm(cmd, writable=False)

    async def add_write_perm(self, cmd: RemotingCommand) -> RemotingCommand:
        return self._set_write_perm(cmd, writable=True)

    def _set_write_perm(self, cmd: RemotingCommand, *, writable: bool) -> RemotingCommand:
        name = get_str(cmd, "brokerName")
        if name not in self.routes.brokers:
            raise BrokerNotExistError(f'broker "{name}" is not registered with this nameserver')
        topics = self.routes.set_write_perm(name, writable)
        self.notifier.mark(topics)
        return cmd.response(ext={"topics": len(topics)})

    async def get_counters(self, cmd: RemotingCommand) -> RemotingCommand:
        return cmd.response(body=pack(self.counters.to_wire()))

    def expire_brokers(self) -> None:
        """Drop brokers silent for too long; their routes change without notifying (hotspot rule)."""
        dropped = self.routes.scan_inactive()
        self.readiness.serving(self.routes.brokers)
        for name in dropped:
            self.dropped_brokers += 1
            log.warning("broker %s dropped: silent for more than %d ms", name, self.config.broker_expired_ms)
        self.notifier.suppress(set().union(*dropped.values()))

    def background_tasks(self) -> list[asyncio.Task[None]]:
        config = self.config
        tasks = [
            asyncio.create_task(
                every_ms_on_loop(config.scan_interval_ms, "broker expiry scan", self.expire_brokers, log)
            ),
            asyncio.create_task(
                every_ms_on_loop(
                    config.notify_scan_interval_ms, "route-change notification round", self.notifier.scan, log
                )
            ),
        ]
        if self.controller is not None:
            scan = self.elect_and_watch
            tasks.append(asyncio.create_task(every_ms_on_loop(SCAN_INTERVAL_MS, "controller election scan", scan, log)))
        return tasks


def create_server(config: NameServerConfig) -> tuple[Listener, int, NameServer]:
    """Bind (not start) a nameserver; call inside the event loop. Port 0 picks a free port."""
    tls = config.server_tls()
    sock = bind(config.listen_host, config.listen_port, "nameserver")
    port = sock.getsockname()[1]
    address = f"{config.listen_host}:{port}"
    try:
        metrics = NodeMetrics(Node("", "nameserver", address)) if config.metrics_port >= 0 else None
        nameserver = NameServer(config, address=address, metrics=metrics)
    except BaseException:  # nothing is left bound
        sock.close()
        raise
    server = Listener(nameserver.dispatcher, sock, tls)
    if metrics is not None:
        try:
            url = metrics.serve(
                config.listen_host,
                config.metrics_port,
                config.listen_host,
                tls,
                config.scrape_access(nameserver.acl),
            )
        except BaseException:  # nothing is left bound
            nameserver.metrics = None
            asyncio.get_running_loop().create_task(server.stop(grace=0))
            raise
        log.info("nameserver %s: metrics on %s", nameserver.address, url)
    return server, port, nameserver


async def start(server: Listener, nameserver: NameServer) -> list[asyncio.Task[None]]:
    if nameserver.controller is not None:  # first: a Raft port that cannot be bound stops the start
        try:
            await nameserver.controller.start()
        except BaseException:
            if nameserver.metrics is not None:
                nameserver.metrics.close()
            raise
    await server.start()
    return nameserver.background_tasks()


async def stop(server: Listener, nameserver: NameServer, tasks: list[asyncio.Task[None]]) -> None:
    for task in tasks:
        task.cancel()
    await server.stop(grace=1)
    if nameserver.controller is not None:
        await nameserver.controller.stop()
    if nameserver.metrics is not None:
        nameserver.metrics.close()
    log.info("nameserver %s stopped cleanly", nameserver.address)


async def serve(server: Listener, nameserver: NameServer, *, ready: Callable[[str], None] | None = None) -> None:
    """Run until SIGTERM/SIGINT, then stop."""
    await serve_until_signalled(server, nameserver, start, stop, ready=ready)
