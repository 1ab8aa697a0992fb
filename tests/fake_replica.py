"""Stand-ins for brokers in controller tests: they register and heartbeat through raw requests,
as a broker's replication layer will, and remember the group view each answer carries."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rocketspark.cluster import ServerProcess, write_toml
from rocketspark.errors import RocketSparkError
from rocketspark.protocol.bodies import unpack
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.remoting.client import RemotingClient, check
from tests.helpers import free_port

ROOT = Path(__file__).resolve().parents[1]
BEAT_INTERVAL_S = 0.25


def call(client: RemotingClient, nameserver: str, code: int, ext: dict[str, Any] | None = None) -> dict[str, Any]:
    """A controller request; its answer's body, or the error it was refused with."""
    response = check(client.invoke(nameserver, RemotingCommand.request(code, ext or {}), 2500))
    body: dict[str, Any] = unpack(response.body)
    return body


class FakeReplica:
    """One replica of a group: registers with a nameserver, then heartbeats to every one."""

    def __init__(self, nameservers: list[str], group: str, replica_id: int, *, cluster: str = "C1") -> None:
        self.nameservers = nameservers
        self.group, self.replica_id, self.cluster = group, replica_id, cluster
        self.address = f"127.0.0.1:{free_port()}"  # never listened on: the controller only records it
        self.max_offset = 0
        self.epoch = -1
        self.view: dict[str, Any] = {}
        self.client = RemotingClient(peer_kind="nameserver")
        self._beating = threading.Event()
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._beat_forever, daemon=True)

    @property
    def header(self) -> dict[str, Any]:
        return {
            "brokerName": self.group,
            "clusterName": self.cluster,
            "replicaId": self.replica_id,
            "address": self.address,
        }

    def register(self, nameserver: str | None = None) -> dict[str, Any]:
        self.view = call(
            self.client, nameserver or self.nameservers[0], RequestCode.CONTROLLER_REGISTER_BROKER, self.header
        )
        self.epoch = self.view["masterEpoch"]
        return self.view

    def beat_once(self, nameserver: str) -> dict[str, Any]:
        ext = {**self.header, "maxOffset": self.max_offset, "masterEpoch": self.epoch}
        view = call(self.client, nameserver, RequestCode.BROKER_HEARTBEAT, ext)
        self.view, self.epoch = view, view["masterEpoch"]
        return view

    def start_beating(self) -> FakeReplica:
        self._beating.set()
        if not self._thread.is_alive():
            self._thread.start()
        return self

    def stop_beating(self) -> None:
        self._beating.clear()

    def alter(self, members: list[int], nameserver: str | None = None) -> dict[str, Any]:
        """As master: set the group's SyncStateSet (at the epochs of the last view it saw)."""
        ext = {
            "brokerName": self.group,
            "masterReplicaId": self.replica_id,
            "masterEpoch": self.view["masterEpoch"],
            "syncStateSet": members,
            "syncStateSetEpoch": self.view["syncStateSetEpoch"],
        }
        self.view = call(
            self.client, nameserver or self.nameservers[0], RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET, ext
        )
        return self.view

    def _beat_forever(self) -> None:
        while not self._closed.wait(BEAT_INTERVAL_S):
            if not self._beating.is_set():
                continue
            for nameserver in self.nameservers:
                try:
                    self.beat_once(nameserver)
                except RocketSparkError:  # a nameserver down, or not caught up: the next beat
                    pass

    def close(self) -> None:
        self._closed.set()
        if self._thread.is_alive():
            self._thread.join(5)
        self.client.close()


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def nameserver_process(directory: Path, name: str, values: dict[str, Any]) -> ServerProcess:
    """A ``python -m nameserver`` child (not started) with ``values`` as its config file."""
    conf = directory / f"{name}.toml"
    write_toml(conf, {"listen_host": "127.0.0.1", "listen_port": 0, "data_dir": str(directory / name), **values})
    return ServerProcess(name, [sys.executable, "-m", "nameserver", "--conf", str(conf)], directory / f"{name}.log")


@contextmanager
def replicas(nameservers: list[str], group: str, count: int) -> Iterator[list[FakeReplica]]:
    made = [FakeReplica(nameservers, group, replica_id) for replica_id in range(1, count + 1)]
    try:
        yield made
    finally:
        for replica in made:
            replica.close()
