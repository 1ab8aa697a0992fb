"""Starting and stopping a local cluster's servers, either way: ``python -m nameserver`` /
``python -m broker`` child processes (each with its TOML config and log in the data directory,
running this code whatever the working directory), or servers on one shared event loop in a
thread of this process.

This is the one module of the ``rocketspark`` package that imports ``broker`` and
``nameserver``, and only when a server starts in-process.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from rocketspark.configfile import from_mapping
from rocketspark.servers import InProcess, ServerProcess, StopServer, write_toml

# ``python -m`` looks in the working directory first: children run where this rocketspark lives,
# so that the servers are this code, not a checkout the caller happens to stand in.
_ROOT = str(Path(__file__).resolve().parent.parent)


class Launcher:
    """A cluster's running servers by name: child processes (``processes``) or servers on the
    shared loop, opened with ``open`` and ended with ``close``."""

    def __init__(self, data_dir: Path, *, processes: bool) -> None:
        self.data_dir = data_dir
        self.processes = processes
        self._procs: dict[str, ServerProcess] = {}
        self._inproc: InProcess | None = None

    def open(self) -> None:
        if not self.processes:
            self._inproc = InProcess()
            self._inproc.start()

    def close(self) -> None:
        if self._inproc is not None:
            self._inproc.close()
            self._inproc = None

    def start_nameserver(self, name: str, values: dict[str, Any]) -> str:
        """Start a nameserver with config ``values``; return its address."""
        if self.processes:
            return self._start_process(name, "nameserver", values)
        from nameserver import server
        from nameserver.config import NameServerConfig

        config = from_mapping(NameServerConfig, values, "nameserver config")
        return self._start_inproc(name, lambda: server.create_server(config), server.start, server.stop)

    def start_broker(self, name: str, values: dict[str, Any]) -> str:
        """Start a broker (or a replica) with config ``values``; return its address."""
        if self.processes:
            return self._start_process(name, "broker", values)
        from broker import server
        from broker.config import BrokerConfig

        config = from_mapping(BrokerConfig, values, f"broker {name} config")
        return self._start_inproc(name, lambda: server.create_server(config), server.start, server.stop)

    def stop(self, name: str) -> None:
        """Stop a server cleanly, if it runs."""
        if self.processes:
            proc = self._procs.pop(name, None)
            if proc is not None:
                proc.stop()
        elif self._inproc is not None:
            running = self._inproc.servers.pop(name, None)
            if running is not None:
                server, owner, tasks, stop = running
                self._inproc.run(stop(server, owner, tasks))

    def process(self, name: str) -> ServerProcess | None:
        """A running child process (``processes`` only)."""
        return self._procs.get(name)

    def kill(self, name: str) -> None:
        """SIGKILL a child process, as a crash would (``processes`` only)."""
        proc = self._procs.pop(name, None)
        if proc is not None:
            proc.kill()

    def _start_process(self, name: str, module: str, values: dict[str, Any]) -> str:
        """``python -m <module>`` with ``values`` as its TOML config; return its address."""
        conf = self.data_dir / f"{name}.toml"
        write_toml(conf, values)
        proc = ServerProcess(name, [sys.executable, "-m", module, "--conf", str(conf)], self.data_dir / f"{name}.log")
        address = proc.start(_child_env(), cwd=_ROOT)
        self._procs[name] = proc
        return address

    def _start_inproc(
        self,
        name: str,
        create: Callable[[], tuple[Any, int, Any]],
        start: Callable[[Any, Any], Awaitable[list[Any]]],
        stop: StopServer,
    ) -> str:
        """Create and start a server on the shared event loop; return its address."""
        inproc = self._inproc
        assert inproc is not None

        async def boot() -> str:
            server, _port, owner = create()
            tasks = await start(server, owner)
            inproc.servers[name] = (server, owner, tasks, stop)
            return str(owner.address)

        address: str = inproc.run(boot())
        return address


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = _ROOT + os.pathsep + env.get("PYTHONPATH", "") if env.get("PYTHONPATH") else _ROOT
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env
