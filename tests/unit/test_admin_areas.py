"""The admin areas work on any connection that answers their protocol: here a scripted one, no
servers. (Against real servers they are exercised through ``Admin`` in tests/integration.)"""

from __future__ import annotations

from typing import Any

from rocketspark.client.admin_core import AdminCore
from rocketspark.client.server_admin import Servers
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.types import Perm, TopicRouteData


class ScriptedCore:
    """Two brokers and two nameservers; every call is recorded and answered with SUCCESS."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, int, dict[str, Any]]] = []
        self.forgotten: list[str] = []

    @property
    def nameservers(self) -> list[str]:
        return ["ns-1:9876", "ns-2:9876"]

    def call(self, address: str, request: RemotingCommand, timeout_ms: int | None = None, *ok: int) -> RemotingCommand:
        self.sent.append((address, request.code, dict(request.ext)))
        return request.response()

    def cluster_list(self) -> dict[str, Any]:
        return {"clusters": {"c": ["a", "b"]}, "brokers": {"a": {"addr": "a:10911"}, "b": {"addr": "b:10911"}}}

    def brokers(self, cluster: str | None = None) -> dict[str, str]:
        return {"a": "a:10911", "b": "b:10911"}

    def broker_named(self, broker_name: str) -> str:
        return self.brokers()[broker_name]

    def topic_route(self, topic: str) -> TopicRouteData:
        raise NotImplementedError

    def forget_route(self, topic: str) -> None:
        self.forgotten.append(topic)

    def nameserver_call(self, request: RemotingCommand) -> RemotingCommand:
        return self.nameserver_call_at(None, request)

    def nameserver_call_at(self, address: str | None, request: RemotingCommand) -> RemotingCommand:
        return self.call(address or self.nameservers[0], request)

    def each_nameserver(self, request_code: int, ext: dict[str, Any]) -> None:
        for address in self.nameservers:
            self.call(address, RemotingCommand.request(request_code, ext))


def test_wiping_a_brokers_write_permission_tells_the_broker_then_every_nameserver() -> None:
    core = ScriptedCore()
    servers: Servers = Servers(core)  # a ScriptedCore is an AdminCore
    servers.wipe_write_perm("b")
    assert core.sent == [
        ("b:10911", RequestCode.UPDATE_BROKER_CONFIG, {"brokerPermission": Perm.READ}),
        ("ns-1:9876", RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "b"}),
        ("ns-2:9876", RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "b"}),
    ]


def test_a_scripted_connection_satisfies_the_admin_core_protocol() -> None:
    core: AdminCore = ScriptedCore()
    assert core.brokers() == {"a": "a:10911", "b": "b:10911"}
