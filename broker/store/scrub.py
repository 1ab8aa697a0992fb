"""The scrub: commit-log segments are re-read and their CRCs checked in the background.

Recovery after a clean stop scans from the last checkpoint only, and a read checks only the
records it returns, so damage inside a segment (a bad sector, a truncated file, a stray
write) would otherwise wait for the unlucky reader. The scrub walks every sealed segment, and
the open one up to what is flushed, one after another, at a bounded rate
(``scrub_bytes_per_s``), through a file descriptor of its own (retention may delete the
segment meanwhile; the scrub then just moves on). When it finds damage it logs it, counts
it, and has a sealed segment scanned the way recovery scans one, which marks the damaged
range as a gap: readers whose entries point into it are then refused with an error naming
the queue and offset, and the queue is rebuilt without the lost records. Damage in the open
segment is reported only: nothing is cut under the writer.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from broker.store.commitlog import CommitLog
from broker.store.scan import Damage, scan_segment
from rocketspark.codec import layout
from rocketspark.codec.heads import check_record
from rocketspark.codec.layout import RecordCorrupted

log = logging.getLogger(__name__)

CHUNK = 1 << 20


@dataclass
class ScrubStats:
    passes: int = 0  # complete rounds over every sealed segment
    segments: int = 0  # segments checked
    bytes: int = 0  # bytes read
    damaged_segments: int = 0
    damage: list[str] = field(default_factory=list)  # what was found, newest last (the last 100)


@dataclass(frozen=True, slots=True)
class ScrubbedLog:
    """The store's log as the scrub sees it: ``append_lock`` guards the list of segments,
    ``maint_lock`` keeps retention and the flusher out of a repair; ``flushed()`` is how
    far the log is on disk."""

    commitlog: CommitLog
    append_lock: threading.Lock
    maint_lock: threading.Lock
    flushed: Callable[[], int]

    def segments(self) -> list[tuple[Path, int, int]]:
        """(path, base, bytes to check) of every segment: all of a sealed one, what is flushed
        of the open one."""
        with self.append_lock:
            segments = list(self.commitlog.segments)
        if not segments:
            return []
        sealed = [(s.path, s.base, s.size) for s in segments[:-1]]
        last = segments[-1]
        return [*sealed, (last.path, last.base, max(0, min(self.flushed(), last.end) - last.base))]

    def repair(self, base: int) -> list[str]:
        """Scan a damaged sealed segment as recovery does, cutting its damaged ranges out as
        gaps (the scrub calls this from its thread; retention waits meanwhile)."""
        with self.maint_lock:
            segment = self.commitlog.segment_for(base)
            if segment is None:
                return []
            damage: list[Damage] = []
            if segment is self.commitlog.segments[-1]:
                return []  # never cut the open segment under its writer: reported, found again
            for _ in scan_segment(segment, is_last=False, damage=damage):
                pass
        return [str(d) for d in damage]


class Scrubber:
    """Runs in its own thread; ``segments()`` lists (path, base, bytes to check) of the
    segments and ``repair(base)`` scans a damaged one as recovery does (the store holds its
    locks)."""

    def __init__(
        self,
        segments: Callable[[], list[tuple[Path, int, int]]],
        repair: Callable[[int], list[str]],
        bytes_per_s: int,
        *,
        max_record_bytes: int,
        idle_s: float,
    ) -> None:
        self.segments = segments
        self.repair = repair
        self.bytes_per_s = bytes_per_s
        self.max_record_bytes = max_record_bytes
        self.idle_s = idle_s  # pause between passes
        self.stats = ScrubStats()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="store-scrub", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _run(self) -> None:
        """A pause first: the store was just recovered, and start-up has better uses for the disk."""
        while not self._stop.wait(self.idle_s):
            try:
                self.scrub_pass()
            except Exception:
                log.exception("scrub pass failed; the next one starts later")

    def scrub_pass(self) -> None:
        """Check every segment once, up to what is flushed now."""
        for path, base, limit in self.segments():
            if self._stop.is_set():
                return
            problem = self.check_segment(path, limit)
            self.stats.segments += 1
            if problem is not None:
                self._found(path, base, problem)
        self.stats.passes += 1

    def _found(self, path: Path, base: int, problem: str) -> None:
        self.stats.damaged_segments += 1
        log.error("scrub found damage in commit-log segment %s: %s", path.name, problem)
        try:
            ranges = self.repair(base) or [problem]  # nothing marked: the open segment
        except Exception:
            log.exception("scrub could not mark the damage in %s", path.name)
            ranges = [problem]
        for line in ranges:
            self.stats.damage.append(f"{path.name}: {line}")
        del self.stats.damage[:-100]

    def check_segment(self, path: Path, limit: int) -> str | None:
        """The first problem in the first ``limit`` bytes of the segment at ``path``, or None."""
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            return None  # retention deleted it
        try:
            return self._walk(fd, limit)
        finally:
            os.close(fd)

    def _walk(self, fd: int, limit: int) -> str | None:
        size = min(os.fstat(fd).st_size, limit)
        buf = b""
        at = 0  # file offset of buf[0]
        pos = 0  # position of the next record in buf
        while True:
            if at + pos >= limit:
                return None  # the checked part of the open segment
            if len(buf) - pos < layout.MIN_BLANK_SIZE or not self._whole_record_in(buf, pos):
                more = self._read(fd, at + len(buf), CHUNK) if at + len(buf) < size else b""
                if not more:
                    return f"ends at segment offset {at + pos} without its end-of-segment marker (truncated?)"
                buf = buf[pos:] + more
                at += pos
                pos = 0
                continue
            total, magic = layout.PREFIX.unpack_from(buf, pos)
            if magic == layout.BLANK_MAGIC:
                return None  # the rest of a sealed segment is padding
            if magic == layout.GAP_MAGIC:
                pos += total  # already cut out and reported
                continue
            try:
                pos += check_record(buf, pos, len(buf))
            except RecordCorrupted as exc:
                return f"{exc} (segment offset {at + pos})"

    def _whole_record_in(self, buf: bytes, pos: int) -> bool:
        total = int.from_bytes(buf[pos : pos + 4], "big")
        return total <= len(buf) - pos or total > self.max_record_bytes  # an absurd size is damage, not a wait

    def _read(self, fd: int, offset: int, n: int) -> bytes:
        """Read, then sleep long enough to keep to the rate."""
        started = time.monotonic()
        data = os.pread(fd, n, offset)
        self.stats.bytes += len(data)
        if self.bytes_per_s > 0:
            self._stop.wait(max(0.0, len(data) / self.bytes_per_s - (time.monotonic() - started)))
        return data
