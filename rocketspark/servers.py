"""Running one server: a child process that announces its address, or servers on one event loop.

``ServerProcess`` starts ``python -m broker`` / ``python -m nameserver`` (or any command that
prints the readiness line), waits for its address with a real deadline, and can stop it
cleanly, kill it, pause it (SIGSTOP) and resume it. ``InProcess`` runs servers on one asyncio
loop in a daemon thread. ``LocalCluster`` (``rocketspark.cluster``) is built from these.
"""

from __future__ import annotations

import asyncio
import queue
import signal
import string
import subprocess
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rocketspark import loops
from rocketspark.errors import ClusterError
from rocketspark.security.private import write_private

READY_TIMEOUT_S = 60.0


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
    """Write a server's config, readable by its owner only (it may hold secrets): created
    afresh with mode 0600, never written under an older file's wider mode."""
    write_private(path, "".join(f"{key} = {_toml_value(value)}\n" for key, value in values.items()).encode())


@dataclass
class ServerProcess:
    """A child server process and the address its readiness line announced."""

    name: str
    args: list[str]
    log_path: Path
    process: subprocess.Popen[str] | None = None
    address: str = ""
    ready_timeout_s: float = READY_TIMEOUT_S

    def start(self, env: dict[str, str] | None = None, cwd: str | None = None) -> str:
        """Start the child and wait, at most ``ready_timeout_s``, for its readiness line."""
        log = open(self.log_path, "a")  # noqa: SIM115 - lives as long as the child
        self.process = subprocess.Popen(
            self.args, stdout=subprocess.PIPE, stderr=log, text=True, env=env, cwd=cwd, start_new_session=True
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
        self.process.send_signal(signal.SIGCONT)  # a paused process cannot stop cleanly
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        """SIGKILL: the process dies at once, as in a crash."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)  # a paused process dies too
            self.process.kill()
            self.process.wait(10)

    def pause(self) -> None:
        """SIGSTOP: the process stops in its tracks, sockets open, as a hung machine would."""
        if self.alive():
            assert self.process is not None
            self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        if self.alive():
            assert self.process is not None
            self.process.send_signal(signal.SIGCONT)


StopServer = Callable[[Any, Any, list[Any]], Awaitable[None]]  # broker.server.stop, nameserver.server.stop


@dataclass
class InProcess:
    """All servers on one event loop in a daemon thread."""

    loop: asyncio.AbstractEventLoop = field(default_factory=loops.new_event_loop)
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
