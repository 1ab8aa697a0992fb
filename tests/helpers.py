"""Small helpers for tests."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import Any


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def eventually(check: Callable[[], Any], timeout_s: float = 10.0, interval_s: float = 0.05) -> Any:
    """Retry ``check`` until it returns a truthy value or stops raising AssertionError."""
    deadline = time.monotonic() + timeout_s
    last: BaseException | None = None
    while time.monotonic() < deadline:
        try:
            value = check()
            if value:
                return value
        except AssertionError as exc:
            last = exc
        time.sleep(interval_s)
    if last is not None:
        raise last
    raise AssertionError(f"condition not met within {timeout_s}s")
