"""One process per data directory: a lock taken before anything in it is read or written.

Two brokers on one ``data_dir`` (a second one started by mistake, a supervisor starting a new
process before the old one died) would both recover, index and write the same files. So a
server takes an exclusive ``flock`` on ``<dir>/LOCK`` first, and writes its PID into it; a
second process finds the lock held and stops at once, touching nothing, with one line naming
the holder. The kernel drops the lock when its holder dies (a SIGKILL included), so a crashed
server never leaves a stale lock behind. ``flock`` locks belong to an open file, so two
servers in one process (an in-process ``LocalCluster``) exclude each other too.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from rocketspark.errors import ConfigError

LOCK_NAME = "LOCK"


class DataDirLocked(ConfigError):
    """Another process holds the data directory."""


class DirLock:
    def __init__(self, directory: Path, key: str) -> None:
        """``key``: the config key that names the directory, for the error message."""
        self.path = directory / LOCK_NAME
        self.key = key
        self._fd: int | None = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise DataDirLocked(
                f"{self.key} {self.path.parent} is in use by process {holder} (it holds {self.path}); stop that "
                f"process first, or give this one a {self.key} of its own. Nothing in it was touched"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing the file drops the lock
