"""Small metadata files (topics, offsets, checkpoints) written so a crash never tears them.

Each write goes to ``<name>.tmp``, is fsynced, renamed over the old file, and the directory
is fsynced, so a reader sees either the old content or the new, whole (tidwall/wal's
``atomicWrite``, RocketMQ's ``string2File``).
"""

from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path
from typing import Any

import msgspec


class MetadataCorrupted(ValueError):
    """A metadata file exists but does not parse."""


def write_json_atomic(path: Path, value: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    data = json.dumps(value, indent=1, sort_keys=True).encode()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


class SnapshotFile:
    """A metadata file saved from snapshots, written off the event loop.

    The owner calls ``changed()`` on every change, takes a snapshot on the event loop, and
    hands it to ``write`` (run in a thread). The file only counts as saved once a write
    succeeded, so a failed write is retried next time; writes run one at a time and an older
    snapshot never overwrites a newer one (a write cancelled at shutdown may still be running
    when the final save starts).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.version = 0  # number of changes so far
        self._saved = 0  # version of the newest snapshot on disk
        self._lock = threading.Lock()

    @property
    def dirty(self) -> bool:
        return self._saved != self.version

    def changed(self) -> None:
        self.version += 1

    def write(self, value: Any, version: int) -> None:
        """Write the snapshot taken at ``version`` unless a newer one was written already."""
        with self._lock:
            if version < self._saved:
                return
            write_json_atomic(self.path, value)
            self._saved = version


def read_json(path: Path, default: Any = None, shape: Any = None) -> Any:
    """Parse ``path``; a missing file gives ``default``, a corrupt one a clear error.

    With ``shape`` (a msgspec type) the content must also have that shape: valid JSON of the
    wrong shape (``[]``, a missing key, a string where a number belongs) is refused with one
    line naming the file and the field, before any code trips over it.
    """
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return default
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise MetadataCorrupted(
            f"{path} is not valid JSON ({exc}); restore it from {path.name}.tmp or a backup, or delete it "
            "to start that metadata empty"
        ) from exc
    if shape is not None:
        try:
            msgspec.convert(value, type=shape, strict=True)
        except msgspec.ValidationError as exc:
            raise MetadataCorrupted(
                f"{path} does not have the shape of a {path.name} file: {exc}; restore it from a backup "
                f"or fix that field"
            ) from None
    return value


class Journal:
    """Changes to a metadata file appended as JSON lines next to it (``<name>.log``), so a
    change costs one small write and one fsync however large the file has grown; the owner
    folds the lines into a fresh snapshot (``compact``) once they outnumber its entries.

    A crash can tear only the last line; ``replay`` skips such a line and says so.
    """

    def __init__(self, path: Path) -> None:
        self.path = path.with_name(path.name + ".log")
        self.lines = 0
        self._fd = -1

    def replay(self, shape: Any) -> list[Any]:
        """The changes since the last snapshot, each checked against ``shape``."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return []
        changes = []
        rows = raw.split(b"\n")
        for number, row in enumerate(rows, 1):
            if not row.strip():
                continue
            try:
                changes.append(msgspec.json.decode(row, type=shape))
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                if number == len(rows):  # no newline after it: the append was torn by a crash
                    logging.getLogger(__name__).warning("%s: ignored a torn last change (%s)", self.path, exc)
                    continue
                raise MetadataCorrupted(
                    f"{self.path} line {number} is not a valid change ({exc}); restore it from a backup or delete "
                    "that line"
                ) from None
        self.lines = len(changes)
        return changes

    def append(self, change: Any) -> None:
        if self._fd < 0:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.write(self._fd, json.dumps(change, sort_keys=True).encode() + b"\n")
        os.fsync(self._fd)
        self.lines += 1

    def reset(self) -> None:
        """Forget the lines: call after the snapshot that holds them was written."""
        self.close()
        self.path.unlink(missing_ok=True)
        self.lines = 0

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
