"""RocketMQ 4.x clients for tests: ali-ons (npm; the real client, run by node) and a raw one.

``AliOns`` runs ``tests/ali_ons/produce.js`` and ``consume.js`` as child processes and reads the
JSON line each prints per message; ``make test`` installs ali-ons (``npm ci`` in
tests/ali_ons) when it is missing. ``RawClient`` speaks RocketMQ's JSON frames itself, for what
ali-ons cannot do (transactions, batches, requests by code) and for bad input: it sends what
Java's client sends, field for field (research/rocketmq-remoting-4x.md).
"""

from __future__ import annotations

import json
import queue
import socket
import subprocess
import threading
from pathlib import Path
from typing import Any

from rocketspark.protocol.codes import Flag
from rocketspark.protocol.command import RemotingCommand
from rocketspark.remoting import frame
from rocketspark.security import rocketmq_acl

ALI_ONS = Path(__file__).parent / "ali_ons"
NODE_TIMEOUT_S = 180


def require_ali_ons() -> None:
    if not (ALI_ONS / "node_modules" / "ali-ons").is_dir():
        raise RuntimeError(f"ali-ons is not installed: run `make test`, or `npm ci` in {ALI_ONS}")


def produce(options: dict[str, Any], timeout_s: float = NODE_TIMEOUT_S) -> list[dict[str, Any]]:
    """Run ali-ons' producer to the end; one dict per send (and a last {"done": n})."""
    require_ali_ons()
    done = subprocess.run(
        ["node", str(ALI_ONS / "produce.js"), json.dumps(options)],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        cwd=ALI_ONS,
    )
    if done.returncode != 0:
        raise AssertionError(f"ali-ons producer failed ({done.returncode}): {done.stderr[-3000:]}")
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


class Consumer:
    """An ali-ons push consumer in its own node process; ``lines`` fill as it prints."""

    def __init__(self, options: dict[str, Any]) -> None:
        require_ali_ons()
        self.process = subprocess.Popen(
            ["node", str(ALI_ONS / "consume.js"), json.dumps({"quiet": False, **options})],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ALI_ONS,
        )
        self.lines: list[dict[str, Any]] = []
        self.errors: list[str] = []
        self._out = threading.Thread(target=self._read, daemon=True)
        self._err = threading.Thread(target=self._read_errors, daemon=True)
        self._out.start()
        self._err.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith("{"):
                self.lines.append(json.loads(line))

    def _read_errors(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.errors.append(line.rstrip())

    @property
    def messages(self) -> list[dict[str, Any]]:
        return [line for line in self.lines if "body" in line and "failed" not in line]

    @property
    def failures(self) -> list[dict[str, Any]]:
        return [line for line in self.lines if "failed" in line]

    @property
    def ready(self) -> bool:
        return any(line.get("ready") for line in self.lines)

    def wait(self, timeout_s: float = NODE_TIMEOUT_S) -> int:
        code = self.process.wait(timeout_s)
        self._out.join(5)
        return code

    def stop(self) -> None:
        """End it as a deployment would: SIGTERM (the process exits at once; its group learns
        of it when its connections close)."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()


class RawClient:
    """One connection speaking RocketMQ's JSON frames, as a 4.x Java client would; requests the
    server pushes (CHECK_TRANSACTION_STATE, NOTIFY_CONSUMER_IDS_CHANGED) land in ``pushed``."""

    def __init__(self, address: str, *, access_key: str | None = None, secret_key: str | None = None) -> None:
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        self.credentials = (access_key, secret_key) if access_key and secret_key else None
        self.pushed: queue.Queue[RemotingCommand] = queue.Queue()
        self.answers: dict[int, queue.Queue[RemotingCommand]] = {}
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        buffer = b""
        while True:
            try:
                chunk = self.sock.recv(65536)
            except OSError:
                return
            if not chunk:
                return
            buffer += chunk
            while len(buffer) >= 4 and len(buffer) >= 4 + frame.PREFIX.unpack_from(buffer, 0)[0]:
                length, word = frame.PREFIX.unpack_from(buffer, 0)
                size = frame.header_length(word)
                command = frame.decode_header(frame.serialization(word), buffer[8 : 8 + size])
                command.body = buffer[8 + size : 4 + length]
                buffer = buffer[4 + length :]
                if command.flag & Flag.RESPONSE:
                    with self._lock:
                        waiting = self.answers.get(command.opaque)
                    if waiting is not None:
                        waiting.put(command)
                else:
                    self.pushed.put(command)

    def request(
        self, code: int, ext: dict[str, Any] | None = None, body: bytes = b"", *, oneway: bool = False
    ) -> RemotingCommand | None:
        fields = {k: str(v) for k, v in (ext or {}).items()}
        if self.credentials is not None:
            fields = rocketmq_acl.sign(fields, body, *self.credentials)
        command = RemotingCommand.request(code, fields, body)
        command.serialize = frame.JSON
        if oneway:
            command.flag |= Flag.ONEWAY
        answer: queue.Queue[RemotingCommand] = queue.Queue()
        with self._lock:
            self.answers[command.opaque] = answer
        self.sock.sendall(b"".join(frame.encode(command)))
        if oneway:
            return None
        return answer.get(timeout=30)

    def call(self, code: int, ext: dict[str, Any] | None = None, body: bytes = b"") -> RemotingCommand:
        answer = self.request(code, ext, body)
        assert answer is not None
        return answer

    def close(self) -> None:
        """Shut the connection down (a plain close would wait for the reader thread's recv)."""
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
