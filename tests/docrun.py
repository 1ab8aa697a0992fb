"""Run a docs page's blocks as a user on one machine runs them, and fail on the first that fails.

Where: the docs write their commands from the repository root (``.venv/bin/rocketspark ...``,
``conf/broker-a.toml``, ``examples/...``). Each page runs in a fresh directory that looks like
a checkout: a symlink to each of the repository's top-level files and directories, and
``.venv`` a symlink to the virtualenv running the tests. So every path the docs write
resolves as it does for a user, while what a page writes (``data/``, checkpoints, parquet)
lands in the fresh directory and dies with it.

How: blocks run in page order. A ```bash block runs with ``bash -e -o pipefail`` (each block a
fresh shell, as the docs' "in a second shell"); a line that starts a foreground server
(``rocketspark cluster up``, ``python -m nameserver|broker``: "Ctrl-C stops it") is started in
the background instead, waited for until its readiness line, kept for the rest of the page,
then stopped with SIGINT, and must exit 0. The ```python blocks of a page run in one
interpreter (``.venv/bin/python``, as the docs say), in order, in one namespace: a page reads
as one session. The environment is the test's without anything the docs would have to tell a
user to set: no ``ROCKETSPARK_*``, ``PYTHONPATH``, ``PYSPARK_*``, nor the virtualenv on PATH.

Ports the docs name (9876, 8080) are used as written; one already taken fails the page with a
sentence saying so (CI machines are clean; here, stop the cluster holding it).
"""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.docblocks import ROOT, Block, logical_lines, page_blocks

BLOCK_TIMEOUT_S = 600.0  # a bound, not a measurement: CI shares 2 cores, and a Spark page starts a JVM
READY_TIMEOUT_S = 180.0
STOP_TIMEOUT_S = 60.0
TRACEBACK = "Traceback (most recent call last)"
_SERVER = re.compile(r"^\s*(\S*/)?(rocketspark cluster up|python3? -m (nameserver|broker))\b")
_PORT = re.compile(r"--(?:console-)?port[ =](\d+)")
_DONE = "\x1edocs-block-done "
# The interpreter of a page's Python blocks: reads one block a line (JSON), runs it in the
# page's namespace, says how it went. Compiled under the page's name and line numbers, so a
# traceback points into the page.
_SESSION = f"""
import json, sys, traceback
namespace = {{"__name__": "__main__"}}
for request in sys.stdin:
    block = json.loads(request)
    try:
        exec(compile("\\n" * block["line"] + block["text"], block["page"], "exec"), namespace)
        outcome = "ok"
    except BaseException:
        traceback.print_exc()
        outcome = "failed"
    sys.stderr.flush()
    print({_DONE!r} + outcome, flush=True)
"""


def checkout(directory: Path) -> Path:
    """A directory that reads like the repository's root (see the module's docstring)."""
    directory.mkdir(parents=True, exist_ok=True)
    for entry in ROOT.iterdir():
        if not entry.name.startswith(".") and entry.name not in {"data", "site", "build"}:
            (directory / entry.name).symlink_to(entry)
    (directory / ".venv").symlink_to(Path(sys.prefix))
    return directory


def user_env() -> dict[str, str]:
    venv_bin = str(Path(sys.prefix) / "bin")
    dropped = ("ROCKETSPARK_", "PYSPARK_", "PYTHONPATH", "VIRTUAL_ENV")
    env = {k: v for k, v in os.environ.items() if not k.startswith(dropped)}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != venv_bin)
    return env


class Output:
    """A child's merged stdout and stderr, read by a thread (so the child never blocks on a
    full pipe), with a wait for a line that has a deadline."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        assert proc.stdout is not None
        stream = proc.stdout
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream: object) -> None:
        for line in stream:  # type: ignore[attr-defined]
            self.lines.append(line)
            self._queue.put(line)
        self._queue.put(None)

    def until(self, wanted: Callable[[str], bool], timeout_s: float, what: str) -> str:
        deadline = time.monotonic() + timeout_s
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self._queue.get(timeout=left)
            except queue.Empty:
                break
            if line is None:
                raise AssertionError(f"{what}: the process ended first\n{self.tail()}")
            if wanted(line):
                return line
        raise AssertionError(f"{what}: nothing after {timeout_s:.0f} s\n{self.tail()}")

    def tail(self, lines: int = 60) -> str:
        return "".join(self.lines[-lines:])


class PageRun:
    """One page's session: its background servers, its Python interpreter, its directory."""

    def __init__(self, page: str, directory: Path) -> None:
        self.page = page
        self.cwd = checkout(directory)
        self.env = user_env()
        self.servers: list[tuple[Block, str, subprocess.Popen[str], Output]] = []
        self.python: tuple[subprocess.Popen[str], Output] | None = None
        self.transcript: list[str] = []  # what the blocks printed, in order

    def run(self, block: Block) -> None:
        if block.lang == "python":
            self._python(block)
        else:
            self._bash(block)

    def _bash(self, block: Block) -> None:
        script: list[str] = []
        for line in logical_lines(block.text):
            if _SERVER.match(line):
                self._shell(block, script)
                script = []
                self._serve(block, line)
            else:
                script.append(line)
        self._shell(block, script)

    def _shell(self, block: Block, lines: list[str]) -> None:
        if not any(line.strip() and not line.strip().startswith("#") for line in lines):
            return
        script = "\n".join(lines)
        done = subprocess.run(
            ["bash", "-e", "-o", "pipefail", "-c", script],
            cwd=self.cwd,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=BLOCK_TIMEOUT_S,
            start_new_session=True,
        )
        self.transcript.append(done.stdout)
        said = f"{block.where} (bash) exited {done.returncode}:\n{script}\n--- its output ---\n{done.stdout[-6000:]}"
        assert done.returncode == 0, said
        assert TRACEBACK not in done.stdout, said

    def _serve(self, block: Block, line: str) -> None:
        for port in ports_of(line):
            assert port_free(port), (
                f"{block.where} runs `{line.strip()}` as written, on port {port}, which is taken: "
                f"stop what holds it (a cluster left from a walkthrough?) and run again"
            )
        proc = subprocess.Popen(
            ["bash", "-c", "exec " + line.strip()],
            cwd=self.cwd,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        output = Output(proc)
        self.servers.append((block, line.strip(), proc, output))
        ready = "cluster ready on " if "cluster up" in line else " ready on "
        output.until(lambda said: ready in said, READY_TIMEOUT_S, f"{block.where}: `{line.strip()}` never got ready")

    def _python(self, block: Block) -> None:
        if self.python is None:
            proc = subprocess.Popen(
                [str(self.cwd / ".venv" / "bin" / "python"), "-u", "-c", _SESSION],
                cwd=self.cwd,
                env=self.env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                start_new_session=True,
            )
            self.python = (proc, Output(proc))
        proc, output = self.python
        assert proc.stdin is not None
        start = len(output.lines)
        proc.stdin.write(json.dumps({"page": self.page, "line": block.line, "text": block.text}) + "\n")
        proc.stdin.flush()
        line = output.until(lambda said: said.startswith(_DONE), BLOCK_TIMEOUT_S, f"{block.where} (python)")
        said = "".join(output.lines[start:])
        self.transcript.append(said)
        assert line.strip().endswith("ok") and TRACEBACK not in said, f"{block.where} (python) failed:\n{said[-6000:]}"

    def close(self) -> None:
        """End the Python session (it must exit by itself: a page leaves nothing running), then
        stop the servers with Ctrl-C, newest first; each must exit 0."""
        problems = []
        if self.python is not None:
            proc, output = self.python
            assert proc.stdin is not None
            proc.stdin.close()
            if stopped(proc) != 0:
                problems.append(f"{self.page}: its Python session did not exit cleanly\n{output.tail()}")
        for block, line, proc, output in reversed(self.servers):
            proc.send_signal(signal.SIGINT)
            if stopped(proc) != 0:
                problems.append(f"{block.where}: `{line}` did not stop cleanly on Ctrl-C\n{output.tail()}")
        assert not problems, "\n".join(problems)


def stopped(proc: subprocess.Popen[str]) -> int | None:
    """The exit code, or None when the process (and its group) had to be killed."""
    try:
        return proc.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        return None


def ports_of(line: str) -> list[int]:
    """The fixed ports a server line listens on: those it names, else cluster up's default."""
    named = [int(port) for port in _PORT.findall(line)]
    if "cluster up" in line and not re.search(r"--port\b", line):
        named.append(9876)
    return [port for port in named if port]


def port_free(port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@contextmanager
def page_session(page: str, directory: Path) -> Iterator[PageRun]:
    """A page's run, whose servers and interpreter are stopped however it ends."""
    run = PageRun(page, directory)
    try:
        yield run
    except BaseException:
        for proc in [s[2] for s in run.servers] + ([run.python[0]] if run.python else []):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        raise
    run.close()


def run_page(page: str, directory: Path) -> str:
    """Run every block of ``page`` the runner runs; what they printed, for the caller to check."""
    blocks = [block for block in page_blocks(ROOT / page) if block.runs_here]
    assert blocks, f"{page} has no block to run"
    with page_session(page, directory) as run:
        for block in blocks:
            run.run(block)
    return "".join(run.transcript)
