"""Making the store durable: the flusher thread, sync-flush waiters and the checkpoint.

Writes land in the page cache (:meth:`broker.store.store.MessageStore.put`); the flusher
fsyncs them every ``flush_interval_ms`` (async mode), or as soon as a sender waits for it
(sync mode: group commit, every waiter released by one fsync). After a flush it writes the
checkpoint recovery starts from, at most every ``checkpoint_interval_ms``: the durable log
offset and each queue's bounds, a consistent snapshot taken under the store's append lock.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import msgspec

from broker.store.commitlog import CommitLog
from broker.store.metafile import read_json, write_json_atomic
from broker.store.queues import QueueSet
from broker.store.stats import StoreStats

log = logging.getLogger(__name__)


class CheckpointFile(msgspec.Struct, frozen=True):
    """``checkpoint``: the durable log offset and each queue's [min, max] (older: max only)."""

    log: Annotated[int, msgspec.Meta(ge=0)]
    queues: dict[str, int | list[int]] = {}


def read_checkpoint(path: Path) -> dict[str, Any] | None:
    value: dict[str, Any] | None = read_json(path, default=None, shape=CheckpointFile)
    return value


@dataclass(frozen=True, slots=True)
class FlushTimes:
    """The flusher's settings, from the store's configuration."""

    flush_interval_ms: int
    sync_flush_timeout_ms: int
    checkpoint_interval_ms: int


@dataclass
class _Waiter:
    offset: int
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[bool] = field(repr=False)


class Flusher:
    """Owns ``flushed_offset``: the log is durable up to it. ``append_lock`` is the store's
    (log end and queue sizes read together); ``maint_lock`` keeps retention and deletes out
    of a flush. ``whole_end`` is where the log ends whole and indexed (a slave's copy may end
    in records not indexed yet), asked under ``append_lock``."""

    def __init__(
        self,
        commitlog: CommitLog,
        queues: QueueSet,
        stats: StoreStats,
        times: FlushTimes,
        *,
        checkpoint: Path,
        append_lock: threading.Lock,
        maint_lock: threading.Lock,
        whole_end: Callable[[], int],
    ) -> None:
        self.commitlog = commitlog
        self.queues = queues
        self.stats = stats
        self.times = times
        self.checkpoint = checkpoint
        self.append_lock = append_lock
        self.maint_lock = maint_lock
        self.whole_end = whole_end
        self.flushed_offset = 0
        self._waiters: list[_Waiter] = []
        self._waiters_lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_checkpoint = 0.0
        self._checkpointed: tuple[int, dict[str, list[int]]] | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="store-flusher", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread (the store then flushes a last time itself, under ``maint_lock``)."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    async def wait_flushed(self, offset: int) -> bool:
        """Sync flush: wait until the log is durable up to ``offset``; False on timeout."""
        if self.flushed_offset >= offset:
            return True
        loop = asyncio.get_running_loop()
        waiter = _Waiter(offset, loop, loop.create_future())
        with self._waiters_lock:
            self._waiters.append(waiter)
        self._wake.set()
        try:
            return await asyncio.wait_for(waiter.future, self.times.sync_flush_timeout_ms / 1000)
        except TimeoutError:
            return False

    def _loop(self) -> None:
        interval = self.times.flush_interval_ms / 1000
        while not self._stop.is_set():
            self._wake.wait(interval)
            self._wake.clear()
            if self._stop.is_set():
                break
            try:
                with self.maint_lock:
                    self.flush_all()
                    self.write_checkpoint()
            except Exception:
                log.exception("store flush failed; will retry")

    def flush_all(self) -> None:
        """Fsync the log and the queues; release the waiters the log's flush satisfied."""
        with self.append_lock:
            end = self.commitlog.max_offset
        started = time.perf_counter()
        self.commitlog.flush()
        if end > self.flushed_offset:  # an idle store's rounds are not flushes worth a sample
            self.stats.on_flush(time.perf_counter() - started)
        self.flushed_offset = max(self.flushed_offset, end)
        self._release_waiters()
        for cq in self.queues:
            cq.flush()

    def _release_waiters(self) -> None:
        with self._waiters_lock:
            ready = [w for w in self._waiters if w.offset <= self.flushed_offset]
            self._waiters = [w for w in self._waiters if w.offset > self.flushed_offset]
        for w in ready:
            w.loop.call_soon_threadsafe(_resolve, w.future)

    def write_checkpoint(self, *, force: bool = False) -> None:
        """Write the checkpoint when its interval passed and it changed (``force``: now)."""
        now = time.monotonic()
        if not force and now - self._last_checkpoint < self.times.checkpoint_interval_ms / 1000:
            return
        with self.append_lock:
            # Everything before the checkpoint is whole and indexed: a slave's copy may end
            # in records not indexed yet, or in the middle of one.
            end = self.whole_end()
            queues = self.queues.table()
        if not force and self._checkpointed == (end, queues):
            return
        for cq in self.queues:
            cq.flush()
        write_json_atomic(self.checkpoint, {"log": min(end, self.flushed_offset), "queues": queues})
        self._checkpointed = (end, queues)
        self._last_checkpoint = now


def _resolve(future: asyncio.Future[bool]) -> None:
    if not future.done():
        future.set_result(True)
