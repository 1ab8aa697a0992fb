"""``LocalCluster``: nameservers and N brokers on 127.0.0.1, for notebooks, tests and sidecars.

Two ways to run them:

- in-process (default): every server runs on one asyncio event loop in a background thread
  of this process; starting takes a fraction of a second and nothing outlives the process;
- ``processes=True``: each server is a real ``python -m nameserver`` / ``python -m broker``
  child process, so one can be killed (``kill_broker``) and restarted on the same port and
  data directory, as a crash test needs.

The servers are started and stopped, either way, by :mod:`rocketspark.launcher`; this
module decides what they are: their configs, ports, names and replica groups.
"""

from __future__ import annotations

import logging
import secrets
import shutil
import tempfile
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from rocketspark.errors import ClusterError
from rocketspark.launcher import Launcher
from rocketspark.ports import free_port, metrics_port_plan
from rocketspark.security.local import LocalSecurity
from rocketspark.security.signing import Credentials
from rocketspark.servers import READY_TIMEOUT_S, ServerProcess, broker_names, write_toml

if TYPE_CHECKING:
    from rocketspark.console.server import Console

__all__ = ["READY_TIMEOUT_S", "ClusterError", "LocalCluster", "ServerProcess", "broker_names", "write_toml"]

log = logging.getLogger(__name__)


class LocalCluster:
    """``nameservers`` nameservers (default one) plus ``brokers`` brokers on 127.0.0.1 with a
    temporary data directory. ``nameserver`` is the address string clients take (several
    joined by ``;``); ``nameserver_addresses`` lists them.

    ``broker_config`` sets broker config keys for every broker (see ``conf/broker-a.toml``),
    e.g. ``{"flush_mode": "sync", "auto_create_topic_enable": False}``; ``nameserver_config``
    the same for the nameserver.

    With ``replicas`` = R > 1 every broker is a replica group of R replicas (ids 0..R-1, each
    with its own port and data directory), and the nameserver runs the controller that elects
    their masters. ``kill``, ``pause``, ``resume`` and ``restart`` act on one replica by its
    address; ``replicas_of(name)`` lists a group's addresses. With several nameservers their
    controllers form one Raft group; ``kill_nameserver`` and ``restart_nameserver`` act on one.

    With ``auth`` every server requires signed, authorized requests: the cluster gets a fresh
    cluster secret and an admin super user, ``admin_access_key``/``admin_secret_key`` (pass
    them to clients, or create users with ``Admin.create_user``).

    ``metrics_urls`` names each server's ``/metrics``; with ``metrics_port`` = N they are on N
    (the nameserver), N+1... (the brokers, then further replicas: ``ports.metrics_port_plan``).
    With ``auth`` they want a bearer token, ``metrics_token``; a scraper sends ``metrics_headers``.

    With ``tls`` every port speaks TLS: a development CA and certificates are made in
    ``<data_dir>/tls`` (``tls_ca_file`` is what clients trust); with ``tls_mutual`` too the
    servers ask clients for a certificate (``tls_client_cert_file``/``tls_client_key_file``).
    ``client_options`` holds every security keyword a client of this cluster needs.
    """

    def __init__(
        self,
        brokers: int = 2,
        *,
        data_dir: str | Path | None = None,
        processes: bool = False,
        broker_config: dict[str, Any] | None = None,
        nameserver_config: dict[str, Any] | None = None,
        cluster_name: str = "DefaultCluster",
        replicas: int = 1,
        nameservers: int = 1,
        auth: bool = False,
        tls: bool = False,
        tls_mutual: bool = False,
        console: bool = True,
        console_port: int = 0,
        metrics_port: int = 0,
    ) -> None:
        _check_shape(replicas=replicas, nameservers=nameservers, tls=tls, tls_mutual=tls_mutual)
        self.nameserver_count = nameservers
        self.replica_count = replicas
        self.broker_count = brokers
        self.processes = processes
        self.cluster_name = cluster_name
        self._own_dir = data_dir is None
        self.data_dir = Path(data_dir) if data_dir else Path(tempfile.mkdtemp(prefix="rocketspark-"))
        self._servers = Launcher(self.data_dir, processes=processes)
        self.security = LocalSecurity.make(auth=auth, tls=tls, tls_mutual=tls_mutual, directory=self.data_dir)
        self.auth, self.tls = auth, tls
        self.admin_access_key = self.security.admin_access_key
        self.admin_secret_key = self.security.admin_secret_key
        # what clients trust, and (mutual TLS) show
        self.tls_ca_file, self.tls_client_cert_file, self.tls_client_key_file = self.security.client_files()
        security = self.security.server_values()
        self.broker_config = security | dict(broker_config or {})
        self.nameserver_config = security | dict(nameserver_config or {})
        self.nameserver_addresses: list[str] = []
        self._nameserver_values: list[dict[str, Any]] = []  # each one's config: a restart reuses its ports
        self.brokers: dict[str, str] = {}  # name -> address
        self._ports: dict[str, int] = {}  # every broker ever started: a restart reuses its port
        self._replicas: dict[str, dict[int, str]] = {}  # group -> replica id -> address
        self._by_address: dict[str, tuple[str, int]] = {}  # replica address -> (group, replica id)
        self._grpc_ports: dict[str, int] = {}  # a server's v2 endpoint port, kept across restarts
        self.grpc_endpoints: dict[str, str] = {}  # broker or replica name -> its v2 endpoint
        self.metrics_port = metrics_port  # >0: the servers' metrics ports are given from here on
        self._metrics_ports: dict[str, int] = {}  # a server's metrics port, kept across restarts
        self.metrics_urls: dict[str, str] = {}  # server name -> its /metrics URL (Prometheus scrapes it)
        self._fresh_metrics_token = secrets.token_urlsafe(24)
        self.metrics_token = ""  # the bearer token scrapers send, when the servers want one (the default with auth)
        self._want_console = console
        self.console_port = console_port
        self._console: Console | None = None
        self.console_url = ""  # the web console, once started
        # who may change things in the console: the admin user with auth, else a console secret
        self.console_access_key = self.admin_access_key or "admin"
        self.console_secret = self.admin_secret_key or secrets.token_urlsafe(18)

    @property
    def grpc_endpoint(self) -> str:
        """``host:port`` of a v2 endpoint, what the official RocketMQ 5 clients are given as
        endpoints (every broker's serves the whole cluster)."""
        if not self.grpc_endpoints:
            raise ClusterError("no broker of this cluster serves the grpc v2 endpoint (grpc_listen_port = -1)")
        return next(iter(self.grpc_endpoints.values()))

    @property
    def metrics_headers(self) -> dict[str, str]:
        """The headers a scraper of ``metrics_urls`` sends: ``Authorization: Bearer
        <metrics_token>`` when the servers want the token (the default with ``auth``), else
        none (with ``metrics_auth = "basic"`` a scraper signs in as a cluster user instead)."""
        return {"Authorization": f"Bearer {self.metrics_token}"} if self.metrics_token else {}

    @property
    def client_options(self) -> dict[str, Any]:
        """Every security keyword a client of this cluster needs (the admin's credentials, the
        TLS files): ``Admin(cluster.nameserver, **cluster.client_options)``; empty without security."""
        return self.security.client_options()

    def __repr__(self) -> str:
        return (
            f"LocalCluster(nameserver={self.nameserver!r}, brokers={sorted(self.brokers)}, auth={self.auth}, "
            f"tls={self.tls}, tls_ca_file={self.tls_ca_file!r})"
        )

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> Self:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._servers.open()
        try:
            self._start_nameservers()
            for name in broker_names(self.broker_count):
                if self.replica_count == 1:
                    self.start_broker(name)
                else:
                    for replica_id in range(self.replica_count):
                        self._start_replica(name, replica_id)
            if self._want_console:
                self._start_console()
        except BaseException:
            self.stop()
            raise
        return self

    def _start_console(self) -> None:
        from rocketspark.console.server import start_console

        signer = Credentials(self.console_access_key, self.console_secret)
        tls = self.security.console_tls()  # the servers' certificate: the admin's secret never crosses in the clear
        self._console = start_console(self.nameserver, self.client_options, signer, port=self.console_port, tls=tls)
        self.console_url = self._console.url

    def stop(self) -> None:
        if self._console is not None:
            self._console.close()
            self._console = None
        for name in list(self.brokers):
            self.stop_broker(name)
        for group, replica_id in list(self._by_address.values()):
            self._servers.stop(_key(group, replica_id))
        for index in range(len(self.nameserver_addresses)):
            self._servers.stop(_nameserver_key(index))
        self._servers.close()
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- nameservers --------------------------------------------------------------------------

    @property
    def nameserver(self) -> str:
        """The nameserver address string clients take: one address, or several joined by ``;``."""
        return ";".join(self.nameserver_addresses)

    def _start_nameservers(self) -> None:
        """Every nameserver; with replica groups each runs a controller, and several
        controllers form one Raft group (each one's peers are the others)."""
        raft = [f"127.0.0.1:{free_port()}" for _ in range(self.nameserver_count)]
        for index in range(self.nameserver_count):
            values: dict[str, Any] = {
                "listen_host": "127.0.0.1",
                "listen_port": 0,
                "acl_file": str(self.data_dir / f"{_nameserver_key(index)}-acl.json"),
                "data_dir": str(self.data_dir / _nameserver_key(index)),
            }
            if self.replica_count > 1:  # replica groups: the controller runs inside the nameserver
                values |= {
                    "controller_enable": True,
                    "controller_raft_address": raft[index],
                    "controller_peers": [a for a in raft if a != raft[index]],
                    "controller_data_dir": str(self.data_dir / f"{_nameserver_key(index)}-controller"),
                }
            self._nameserver_values.append(self._with_metrics(_nameserver_key(index), values | self.nameserver_config))
            self.nameserver_addresses.append("")
        for index in range(self.nameserver_count):  # one by one: a controller with peers serves at once,
            self._start_nameserver(index)  # and requests wait for a Raft leader

    def _start_nameserver(self, index: int) -> str:
        values = self._nameserver_values[index]
        address = self._servers.start_nameserver(_nameserver_key(index), values)
        values["listen_port"] = int(address.rsplit(":", 1)[1])
        self.nameserver_addresses[index] = address
        return address

    def _nameserver_index(self, address: str) -> int:
        if address not in self.nameserver_addresses:
            raise ClusterError(f"no nameserver of this cluster is at {address}; nameservers: {self.nameserver}")
        return self.nameserver_addresses.index(address)

    def kill_nameserver(self, address: str) -> None:
        """SIGKILL one nameserver (and the controller in it), as a crash would."""
        if not self.processes:
            raise ClusterError("kill_nameserver needs LocalCluster(processes=True)")
        self._servers.kill(_nameserver_key(self._nameserver_index(address)))

    def restart_nameserver(self, address: str) -> str:
        """Start a nameserver again on its ports and controller data (stopping it first if it runs)."""
        index = self._nameserver_index(address)
        self._servers.stop(_nameserver_key(index))
        return self._start_nameserver(index)

    # -- brokers ------------------------------------------------------------------------------

    def broker_values(self, name: str) -> dict[str, Any]:
        return {
            "broker_name": name,
            "cluster_name": self.cluster_name,
            "listen_host": "127.0.0.1",
            "listen_port": self._ports.get(name, 0),
            "data_dir": str(self.data_dir / name),
            "nameservers": list(self.nameserver_addresses),
            **self.broker_config,
        }

    def start_broker(self, name: str | None = None) -> str:
        """Start a broker (a new one, or one that was stopped or killed, on its old port)."""
        name = name or broker_names(len(self._ports) + 1)[-1]
        address = self._start_broker_server(name, self.broker_values(name))
        self.brokers[name] = address
        self._ports[name] = int(address.rsplit(":", 1)[1])
        return address

    def _start_broker_server(self, key: str, values: dict[str, Any]) -> str:
        if values.get("grpc_listen_port", 0) == 0:  # chosen here, so that grpc_endpoint can name it
            values = values | {"grpc_listen_port": self._grpc_ports.setdefault(key, free_port())}
        if values["grpc_listen_port"] > 0:
            self.grpc_endpoints[key] = f"127.0.0.1:{values['grpc_listen_port']}"
        return self._servers.start_broker(key, self._with_metrics(key, values))

    def _with_metrics(self, key: str, values: dict[str, Any]) -> dict[str, Any]:
        """A server's config with its metrics port chosen here (kept across restarts, so that
        ``metrics_urls`` names it before it starts and a scraper keeps finding it)."""
        port = values.get("metrics_port", 0)
        if port == 0:
            groups, counts = broker_names(self.broker_count), (self.nameserver_count, self.replica_count)
            plan = metrics_port_plan(self.metrics_port, key, groups, *counts) if self.metrics_port > 0 else 0
            port = self._metrics_ports.setdefault(key, plan or free_port())
        if port > 0:
            self.metrics_urls[key] = f"{'https' if self.tls else 'http'}://127.0.0.1:{port}/metrics"
        scheme = values.get("metrics_auth", "")
        if scheme == "bearer" or (scheme == "" and (values.get("auth_enable") or values.get("metrics_token"))):
            values = {"metrics_token": self._fresh_metrics_token} | values  # a token of the caller's own wins
            self.metrics_token = values["metrics_token"]
        return values | {"metrics_port": port}

    # -- replica groups -----------------------------------------------------------------------

    def _start_replica(self, group: str, replica_id: int) -> str:
        key = _key(group, replica_id)
        values = {
            **self.broker_values(group),
            "listen_port": self._ports.get(key, 0),
            "data_dir": str(self.data_dir / key),
            "controller_mode": True,
            "replica_id": replica_id,
            **self.broker_config,
        }
        address = self._start_broker_server(key, values)
        self._ports[key] = int(address.rsplit(":", 1)[1])
        self._replicas.setdefault(group, {})[replica_id] = address
        self._by_address[address] = (group, replica_id)
        self.brokers.setdefault(group, address)
        return address

    def replicas_of(self, group: str) -> list[str]:
        """The addresses of a replica group's replicas, by replica id."""
        return [address for _, address in sorted(self._replicas.get(group, {}).items())]

    def _replica(self, address: str) -> tuple[str, int]:
        found = self._by_address.get(address)
        if found is None:
            raise ClusterError(f"no replica of this cluster is at {address}; replicas: {sorted(self._by_address)}")
        return found

    def _process(self, address: str) -> ServerProcess:
        if not self.processes:
            raise ClusterError("kill, pause and resume need LocalCluster(processes=True)")
        proc = self._servers.process(_key(*self._replica(address)))
        if proc is None:
            raise ClusterError(f"the replica at {address} is not running; restart({address!r}) starts it")
        return proc

    def kill(self, address: str) -> None:
        """SIGKILL one replica, as a crash would."""
        self._process(address).kill()

    def pause(self, address: str) -> None:
        """SIGSTOP one replica: it hangs with its connections open."""
        self._process(address).pause()

    def resume(self, address: str) -> None:
        self._process(address).resume()

    def restart(self, address: str) -> str:
        """Start a replica again on its port and data directory (stopping it cleanly first
        if it runs)."""
        group, replica_id = self._replica(address)
        self._servers.stop(_key(group, replica_id))
        return self._start_replica(group, replica_id)

    def stop_broker(self, name: str) -> None:
        """Stop a broker cleanly (it unregisters and flushes)."""
        self.brokers.pop(name, None)
        self._servers.stop(name)

    def kill_broker(self, name: str) -> None:
        """SIGKILL a broker process, as a crash would (``processes=True`` only)."""
        if not self.processes:
            raise ClusterError("kill_broker needs LocalCluster(processes=True)")
        self.brokers.pop(name, None)
        self._servers.kill(name)

    def broker_pid(self, name: str) -> int | None:
        """A broker's process id (``processes=True``), e.g. to SIGSTOP it in a test."""
        proc = self._servers.process(name)
        return proc.pid if proc else None


def _check_shape(*, replicas: int, nameservers: int, tls: bool, tls_mutual: bool) -> None:
    """Refuse a cluster that cannot be built, before anything is made."""
    if replicas < 1:
        raise ClusterError(f"replicas must be at least 1, not {replicas}")
    if nameservers < 1:
        raise ClusterError(f"nameservers must be at least 1, not {nameservers}")
    if tls_mutual and not tls:
        raise ClusterError("tls_mutual needs tls=True")


def _nameserver_key(index: int) -> str:
    """A nameserver's name for its process and log: ``nameserver``, then ``nameserver-1``, ..."""
    return "nameserver" if index == 0 else f"nameserver-{index}"


def _key(group: str, replica_id: int) -> str:
    """A replica's name for its process, log and data directory."""
    return f"{group}-r{replica_id}"
