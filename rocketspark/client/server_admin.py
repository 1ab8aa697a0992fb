"""The servers themselves: a broker's write permission, its runtime figures and counters, a
nameserver's counters (mqadmin's wipeWritePerm, addWritePerm, brokerStatus).

Wiping a broker's write permission drains it gracefully: normal topics stop writing to it,
reads continue. On its own::

    from rocketspark.client.admin_core import AdminConnection
    from rocketspark.client.server_admin import Servers

    with AdminConnection("127.0.0.1:9876") as connection:
        servers = Servers(connection)
        servers.wipe_write_perm("broker-a")
        print(servers.broker_counters("broker-a"))
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rocketspark.client.admin_core import AdminCore
from rocketspark.errors import RocketSparkError
from rocketspark.protocol.bodies import unpack
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.types import Perm


class Servers:
    """Brokers' permissions and figures, nameservers' counters."""

    def __init__(self, core: AdminCore) -> None:
        self.core = core

    def wipe_write_perm(self, broker_name: str) -> None:
        """Stop new writes to a broker (graceful drain); reads continue."""
        self._set_write_perm(broker_name, writable=False)

    def add_write_perm(self, broker_name: str) -> None:
        self._set_write_perm(broker_name, writable=True)

    def _set_write_perm(self, broker_name: str, *, writable: bool) -> None:
        address = self.core.broker_named(broker_name)
        perm = Perm.READ_WRITE if writable else Perm.READ
        self.core.call(address, RemotingCommand.request(RequestCode.UPDATE_BROKER_CONFIG, {"brokerPermission": perm}))
        code = RequestCode.ADD_WRITE_PERM_OF_BROKER if writable else RequestCode.WIPE_WRITE_PERM_OF_BROKER
        self.core.each_nameserver(code, {"brokerName": broker_name})

    def broker_runtime(self, broker_name: str) -> dict[str, Any]:
        request = RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO)
        info: dict[str, Any] = unpack(self.core.call(self.core.broker_named(broker_name), request).body)
        return info

    def broker_counters(self, broker_name: str) -> dict[str, Any]:
        """Requests served by code, messages and bytes stored, and more."""
        return self.counters_at(self.core.broker_named(broker_name))

    def counters_at(self, address: str) -> dict[str, Any]:
        """``broker_counters`` of the broker at ``address`` (no look-up of its name: for a
        caller that has every broker's address already, as a sampler does)."""
        request = RemotingCommand.request(RequestCode.GET_COUNTERS)
        counters: dict[str, Any] = unpack(self.core.call(address, request).body)
        return counters

    def nameserver_counters(self, address: str | None = None) -> dict[str, Any]:
        """Requests served by code (route queries are code 105), brokers, topics; of the
        nameserver at ``address`` (default: the first)."""
        request = RemotingCommand.request(RequestCode.GET_COUNTERS)
        counters: dict[str, Any] = unpack(self.core.nameserver_call_at(address, request).body)
        return counters

    def metrics_urls(self, broker_names: list[str]) -> dict[str, str]:
        """Where each server serves ``/metrics``, as it says itself (a nameserver's counters, a
        broker's runtime info, as RocketMQ's clusterList reads each broker's): by nameserver
        address and by broker name; "" for one that serves none, or that did not answer."""
        urls = {address: _said(self.nameserver_counters, address) for address in self.core.nameservers}
        return urls | {name: _said(self.broker_runtime, name) for name in broker_names}


def _said(ask: Callable[[str], dict[str, Any]], server: str) -> str:
    """The ``metricsUrl`` a server's figures give, or "" (none, or no answer)."""
    try:
        return str(ask(server).get("metricsUrl", ""))
    except RocketSparkError:
        return ""
