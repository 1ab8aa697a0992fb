"""A fixed-size, preallocated file mapped into memory (RocketMQ's ``MappedFile``).

Commit-log and consume-queue segments are each one MappedFile. The file is created at its
full size (sparse, so unwritten parts cost no disk) and mapped once for reading; reads are
slices of the mapping. Writes go through ``pwrite`` on the file descriptor, never through the
mapping: a store into a mapped page whose block the file system cannot allocate (a full disk)
kills the process with SIGBUS, while ``pwrite`` fails with ENOSPC or EIO, an ``OSError`` the
broker answers and survives. Pages written with ``pwrite`` are the mapping's pages (one page
cache), so a read sees a write at once. ``flush`` forces written data to disk with ``fsync``,
which releases the GIL while it waits.
"""

from __future__ import annotations

import errno
import mmap
import os
import threading
from pathlib import Path
from typing import Protocol

_ZERO_CHUNK = 1 << 20
_ZEROS = bytes(_ZERO_CHUNK)


class Sync(Protocol):
    """Forces a file's written data to disk: ``os.fsync``. The store hands one to every file
    it makes, so that a test can stand in a disk whose fsync fails or stalls."""

    def __call__(self, fd: int, /) -> None: ...


class MappedFile:
    """One segment. Not thread-safe for writers; a single writer plus a flusher thread is fine."""

    __slots__ = ("_fd", "_flush_lock", "_mm", "_sync", "base", "flushed", "path", "size", "wrote")

    def __init__(
        self, path: Path, base: int, size: int, *, create: bool, mapped: bool = True, sync: Sync = os.fsync
    ) -> None:
        """``mapped=False`` reads with ``pread`` instead of a mapping: a consume-queue file is
        read a few entries at a time, and a mapping costs a second file descriptor (Python's
        mmap keeps a duplicate), which a broker with 10,000 queues cannot spare."""
        self.path = path
        self.base = base  # offset of byte 0 of this file in its log's address space
        self.size = size
        self.wrote = 0  # bytes appended so far (set by the owner after recovery)
        self.flushed = 0  # bytes known to be on disk
        self._mm: mmap.mmap | None = None
        self._sync = sync
        flags = os.O_RDWR | (os.O_CREAT if create else 0)
        self._fd = os.open(path, flags, 0o644)
        try:
            actual = os.fstat(self._fd).st_size
            if actual != size:
                if not create and actual > size:
                    raise ValueError(f"{path} is {actual} bytes, larger than the configured segment size {size}")
                os.ftruncate(self._fd, size)
            if mapped:
                self._mm = mmap.mmap(self._fd, size, access=mmap.ACCESS_READ)
        except BaseException:
            os.close(self._fd)
            raise
        self._flush_lock = threading.Lock()

    @property
    def end(self) -> int:
        """Log offset one past the last written byte."""
        return self.base + self.wrote

    @property
    def free(self) -> int:
        return self.size - self.wrote

    def view(self) -> mmap.mmap:
        """The whole mapping, for scanning during recovery."""
        if self._mm is None:
            raise ValueError(f"{self.path} is not mapped")
        return self._mm

    def append(self, data: bytes | bytearray | memoryview) -> int:
        """Write ``data`` at the write position; return the file-relative position it landed at.

        On an ``OSError`` (ENOSPC, EIO) the write position does not move: whatever part of
        ``data`` reached the file lies past it and is overwritten by the next append.
        """
        pos = self.wrote
        n = len(data)
        if pos + n > self.size:
            raise ValueError(f"append of {n} bytes overflows {self.path.name} at {pos}/{self.size}")
        self.write_at(pos, data)
        self.wrote = pos + n
        return pos

    def append_parts(self, parts: list[bytes | memoryview]) -> int:
        """``append`` of several buffers in one system call (``pwritev``): a record's stamped
        head and the rest as its producer built it."""
        pos = self.wrote
        n = sum(map(len, parts))
        if pos + n > self.size:
            raise ValueError(f"append of {n} bytes overflows {self.path.name} at {pos}/{self.size}")
        written = os.pwritev(self._fd, parts, pos)
        if written < n:  # a short write (the disk filling up): finish it, or fail, as append does
            self.write_at(pos + written, memoryview(b"".join(parts))[written:])
        self.wrote = pos + n
        return pos

    def write_at(self, pos: int, data: bytes | bytearray | memoryview) -> None:
        """Overwrite bytes in place (recovery marks damaged regions, consume queues fill holes)."""
        view = memoryview(data)
        while view:
            written = os.pwrite(self._fd, view, pos)
            if written <= 0:  # pwrite reports a full disk as an error, but never loop on 0
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self.path))
            view = view[written:]
            pos += written

    def read(self, pos: int, n: int) -> bytes:
        """``n`` bytes at ``pos``, read with ``pread``: a read through the mapping would leave
        its pages mapped into this process, and a broker serving reads across a 10 GiB log would
        count all of them in its resident set."""
        return os.pread(self._fd, n, pos)

    def release(self) -> None:
        """Drop this process's mapping of the pages a scan touched (they stay in the page
        cache): after recovery scanned a log, its pages would otherwise count as resident."""
        if self._mm is not None:
            self._mm.madvise(mmap.MADV_DONTNEED)

    def zero_from(self, pos: int) -> None:
        """Erase every byte from ``pos`` to the end of the file (truncate a torn tail).

        Only the file's allocated extents are rewritten: writing zeros over the sparse rest
        of a preallocated segment would allocate it for nothing.
        """
        for start, stop in self.data_extents(pos):
            for chunk in range(start, stop, _ZERO_CHUNK):
                self.write_at(chunk, _ZEROS[: min(_ZERO_CHUNK, stop - chunk)])
        self.wrote = min(self.wrote, pos)
        self.flushed = min(self.flushed, pos)

    def data_extents(self, pos: int) -> list[tuple[int, int]]:
        extents: list[tuple[int, int]] = []
        while pos < self.size:
            try:
                start = os.lseek(self._fd, pos, os.SEEK_DATA)
            except OSError as exc:
                if exc.errno == errno.ENXIO:  # no data after pos
                    break
                return [(pos, self.size)]  # no SEEK_DATA support: erase it all
            stop = min(os.lseek(self._fd, start, os.SEEK_HOLE), self.size)
            extents.append((start, stop))
            pos = stop
        return extents

    def flush(self) -> int:
        """fsync written data; return the flushed position. Safe to call from a flusher thread."""
        with self._flush_lock:
            target = self.wrote
            if target > self.flushed:
                self._sync(self._fd)
                self.flushed = target
            return self.flushed

    def mtime(self) -> float:
        return os.fstat(self._fd).st_mtime

    def touch(self, when: float) -> None:
        os.utime(self.path, (when, when))

    def close(self) -> None:
        if self._fd >= 0:
            if self._mm is not None:
                self._mm.close()
            os.close(self._fd)
            self._fd = -1

    def delete(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)
