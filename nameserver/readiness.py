"""Whether a nameserver has heard from its brokers since it started ("ready").

Nameservers keep routes in memory only, as RocketMQ's do: a restarted one knows no topic
until the brokers register with it again. Answering "no such topic" in that window sends an
operator off to create a topic that exists. So a nameserver remembers which brokers it served
(``<data_dir>/known-brokers.json``, rewritten only when that set changes) and, after a restart,
is *not ready* until each of them has registered again, or ``startup_wait_ms`` has passed
(a broker that died meanwhile never will). Brokers ask every nameserver each second whether it
has their current registration (QUERY_DATA_VERSION) and register again at once when it has
not, so the window normally closes within a second or two.

A nameserver that has no file (its first start) expects nobody and is ready at once.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from rocketspark.security.private import write_private

log = logging.getLogger("nameserver")
FILE_NAME = "known-brokers.json"


class Readiness:
    def __init__(self, data_dir: Path | None, wait_ms: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.path = data_dir / FILE_NAME if data_dir is not None else None
        self.clock = clock
        self.started = clock()
        self.wait_s = wait_ms / 1000
        self._known: set[str] = set()
        self.expected: set[str] = self._load()
        self._ready = not self.expected

    def _load(self) -> set[str]:
        if self.path is None or not self.path.exists():
            return set()
        try:
            names = json.loads(self.path.read_text())["brokers"]
            return {str(n) for n in names}
        except (OSError, ValueError, KeyError, TypeError) as exc:  # a damaged file: wait the whole window
            log.warning("%s cannot be read (%s): waiting %g s for the brokers to register", self.path, exc, self.wait_s)
            return {"(unknown: the list of known brokers is damaged)"}

    @property
    def ready(self) -> bool:
        if not self._ready and (not self.expected or self.clock() - self.started >= self.wait_s):
            self._ready = True
            if self.expected:
                log.warning(
                    "nameserver ready after %g s without hearing from %s (stopped or unreachable)",
                    self.wait_s,
                    ", ".join(sorted(self.expected)),
                )
            self.expected = set()
        return self._ready

    def waiting_for(self) -> list[str]:
        return [] if self.ready else sorted(self.expected)

    def uptime_s(self) -> float:
        return self.clock() - self.started

    def ready_in_s(self) -> float:
        return 0.0 if self.ready else max(0.0, self.wait_s - (self.clock() - self.started))

    def registered(self, name: str) -> None:
        """A broker registered: one fewer to wait for."""
        if self.expected:
            self.expected.discard(name)
            if not self.expected:
                log.info("nameserver ready: every broker it knew has registered again")

    def serving(self, names: Iterable[str]) -> None:
        """The brokers this nameserver serves now; the file follows when the set changes."""
        known = set(names) | (set() if self.ready else self.expected)  # a crash now must still wait for those
        if known == self._known or self.path is None:
            self._known = known
            return
        self._known = known
        try:
            write_private(self.path, json.dumps({"brokers": sorted(known)}).encode())
        except OSError as exc:
            log.warning("cannot save the known brokers to %s: %s", self.path, exc)
