"""``LocalCluster``: a nameserver and N brokers on 127.0.0.1, for notebooks, tests and sidecars.

Two ways to run them:

- in-process (default): every server runs on one asyncio event loop in a background thread
  of this process; starting takes a fraction of a second and nothing outlives the process;
- ``processes=True``: each server is a real ``python -m nameserver`` / ``python -m broker``
  child process, so one can be killed (``kill_broker``) and restarted on the same port and
  data directory, as a crash test needs.

This is the one module of the ``rocketspark`` package that imports ``broker`` and
``nameserver``, and only when a cluster starts.
"""

from __future__ import annotations

import asyncio
import os
import queue
import shutil
import signal
import string
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from rocketspark.configfile import from_mapping

READY_TIMEOUT_S = 60.0


class ClusterError(RuntimeError):
    """A server of the local cluster failed to start or stop; the message holds its output."""


def broker_names(count: int) -> list[str]:
    return [f"broker-{string.ascii_lowercase[i % 26]}{'' if i < 26 else i // 26}" for i in range(count)]


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return repr(value)


def write_toml(path: Path, values: dict[str, Any]) -> None:
    path.write_text("".join(f"{key} = {_toml_value(value)}\n" for key, value in values.items()))


@dataclass
class ServerProcess:
    """A child server process and the address its readiness line announced."""

    name: str
    args: list[str]
    log_path: Path
    process: subprocess.Popen[str] | None = None
    address: str = ""
    ready_timeout_s: float = READY_TIMEOUT_S

    def start(self, env: dict[str, str] | None = None) -> str:
        """Start the child and wait, at most ``ready_timeout_s``, for its readiness line."""
        log = open(self.log_path, "a")  # noqa: SIM115 - lives as long as the child
        self.process = subprocess.Popen(
            self.args, stdout=subprocess.PIPE, stderr=log, text=True, env=env, start_new_session=True
        )
        log.close()
        lines: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        threading.Thread(target=self._read_stdout, args=(self.process, lines), daemon=True).start()
        deadline = time.monotonic() + self.ready_timeout_s
        why = f"did not print its readiness line within {self.ready_timeout_s:g} s"
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = lines.get(timeout=left)  # a child hanging before its first line cannot hang us
            except queue.Empty:
                break
            if line is None:
                try:
                    why = f"exited with status {self.process.wait(5)} before it was ready"
                except subprocess.TimeoutExpired:
                    why = "closed its output before it was ready"
                break
            if " ready on " in line:
                self.address = line.rsplit(" ready on ", 1)[1].strip()
                return self.address
        self.kill()
        raise ClusterError(f"{self.name} {why}; its log {self.log_path} ends with:\n{self.tail()}")

    @staticmethod
    def _read_stdout(process: subprocess.Popen[str], lines: queue.SimpleQueue[str | None]) -> None:
        """Hand stdout lines over until the readiness line (None: the child closed stdout),
        then keep draining the pipe so that the child never blocks writing to it."""
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line)
            if " ready on " in line:
                break
        else:
            lines.put(None)
            return
        for _ in process.stdout:
            pass

    def tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text().splitlines()[-lines:])
        except OSError:
            return "(no log)"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, timeout_s: float = 15) -> None:
        """SIGTERM and wait for the clean shutdown; SIGKILL if it hangs."""
        if not self.alive():
            return
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        """SIGKILL: the process dies at once, as in a crash."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)


StopServer = Callable[[Any, Any, list[Any]], Awaitable[None]]  # broker.server.stop, nameserver.server.stop


@dataclass
class _InProcess:
    """All servers on one event loop in a daemon thread."""

    loop: asyncio.AbstractEventLoop = field(default_factory=asyncio.new_event_loop)
    thread: threading.Thread | None = None
    servers: dict[str, tuple[Any, Any, list[Any], StopServer]] = field(default_factory=dict)

    def start(self) -> None:
        self.thread = threading.Thread(target=self.loop.run_forever, name="local-cluster", daemon=True)
        self.thread.start()

    def run(self, coro: Any, timeout_s: float = READY_TIMEOUT_S) -> Any:
        future: Future[Any] = asyncio.run_coroutine_threadsafe(coro, self.loop)
        return future.result(timeout_s)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        if self.thread is not None:
            self.thread.join(10)
        self.loop.close()


class LocalCluster:
    """A nameserver plus ``brokers`` brokers on 127.0.0.1 with a temporary data directory.

    ``broker_config`` sets broker config keys for every broker (see ``conf/broker-a.toml``),
    e.g. ``{"flush_mode": "sync", "auto_create_topic_enable": False}``; ``nameserver_config``
    the same for the nameserver.
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
    ) -> None:
        self.broker_count = brokers
        self.processes = processes
        self.broker_config = dict(broker_config or {})
        self.nameserver_config = dict(nameserver_config or {})
        self.cluster_name = cluster_name
        self._own_dir = data_dir is None
        self.data_dir = Path(data_dir) if data_dir else Path(tempfile.mkdtemp(prefix="rocketspark-"))
        self.nameserver = ""
        self.brokers: dict[str, str] = {}  # name -> address
        self._procs: dict[str, ServerProcess] = {}
        self._inproc: _InProcess | None = None
        self._ports: dict[str, int] = {}  # every broker ever started: a restart reuses its port

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> Self:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if not self.processes:
            self._inproc = _InProcess()
            self._inproc.start()
        try:
            self._start_nameserver()
            for name in broker_names(self.broker_count):
                self.start_broker(name)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for name in list(self.brokers):
            self.stop_broker(name)
        self._stop_server("nameserver")
        if self._inproc is not None:
            self._inproc.close()
            self._inproc = None
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- nameserver ---------------------------------------------------------------------------

    def _start_nameserver(self) -> None:
        values = {"listen_host": "127.0.0.1", "listen_port": 0, **self.nameserver_config}
        if self.processes:
            self.nameserver = self._start_process("nameserver", "nameserver", values)
            return
        from nameserver import server
        from nameserver.config import NameServerConfig

        config = from_mapping(NameServerConfig, values, "nameserver config")
        self.nameserver = self._start_inproc(
            "nameserver", lambda: server.create_server(config), server.start, server.stop
        )

    # -- brokers ------------------------------------------------------------------------------

    def broker_values(self, name: str) -> dict[str, Any]:
        return {
            "broker_name": name,
            "cluster_name": self.cluster_name,
            "listen_host": "127.0.0.1",
            "listen_port": self._ports.get(name, 0),
            "data_dir": str(self.data_dir / name),
            "nameservers": [self.nameserver],
            **self.broker_config,
        }

    def start_broker(self, name: str | None = None) -> str:
        """Start a broker (a new one, or one that was stopped or killed, on its old port)."""
        name = name or broker_names(len(self._ports) + 1)[-1]
        values = self.broker_values(name)
        if self.processes:
            address = self._start_process(name, "broker", values)
        else:
            from broker import server
            from broker.config import BrokerConfig

            config = from_mapping(BrokerConfig, values, f"broker {name} config")
            address = self._start_inproc(name, lambda: server.create_server(config), server.start, server.stop)
        self.brokers[name] = address
        self._ports[name] = int(address.rsplit(":", 1)[1])
        return address

    def stop_broker(self, name: str) -> None:
        """Stop a broker cleanly (it unregisters and flushes)."""
        self.brokers.pop(name, None)
        self._stop_server(name)

    def kill_broker(self, name: str) -> None:
        """SIGKILL a broker process, as a crash would (``processes=True`` only)."""
        if not self.processes:
            raise ClusterError("kill_broker needs LocalCluster(processes=True)")
        self.brokers.pop(name, None)
        proc = self._procs.pop(name, None)
        if proc is not None:
            proc.kill()

    def broker_pid(self, name: str) -> int | None:
        """A broker's process id (``processes=True``), e.g. to SIGSTOP it in a test."""
        proc = self._procs.get(name)
        return proc.pid if proc else None

    # -- one server, either way ---------------------------------------------------------------

    def _start_process(self, name: str, module: str, values: dict[str, Any]) -> str:
        """``python -m <module>`` with ``values`` as its TOML config; return its address."""
        conf = self.data_dir / f"{name}.toml"
        write_toml(conf, values)
        proc = ServerProcess(name, [sys.executable, "-m", module, "--conf", str(conf)], self.data_dir / f"{name}.log")
        address = proc.start(self._child_env())
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

    def _stop_server(self, name: str) -> None:
        if self.processes:
            proc = self._procs.pop(name, None)
            if proc is not None:
                proc.stop()
        elif self._inproc is not None:
            running = self._inproc.servers.pop(name, None)
            if running is not None:
                server, owner, tasks, stop = running
                self._inproc.run(stop(server, owner, tasks))

    def _child_env(self) -> dict[str, str]:
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "") if env.get("PYTHONPATH") else root
        env.setdefault("PYTHONUNBUFFERED", "1")
        return env
