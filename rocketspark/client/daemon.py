"""A background thread that is started on first need and started again if it ever died."""

from __future__ import annotations

import threading
from collections.abc import Callable


class DaemonThread:
    """One daemon thread running ``target``; ``ensure()`` is cheap when it already runs, so
    callers on hot paths may call it every time they add work for it."""

    def __init__(self, target: Callable[[], None], name: str) -> None:
        self._target = target
        self._name = name
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def ensure(self) -> None:
        thread = self._thread
        if thread is not None and thread.is_alive():
            return
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._target, name=self._name, daemon=True)
                self._thread.start()
