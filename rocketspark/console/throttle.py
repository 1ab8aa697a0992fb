"""Slowing down wrong sign-ins to the console: guessing the admin's secret is made impractical,
and an attacker cannot lock the real admin out.

Each wrong sign-in is counted against the client's address (an IPv6 client by its /64, which
one host typically holds whole) and against the console as a whole. Past a few free failures
(``FREE_FAILURES`` per address, ``GLOBAL_FREE_FAILURES`` in all) the next sign-in must wait:
``BASE_WAIT_S``, doubling with each further failure, up to ``MAX_WAIT_S``. A sign-in during a
wait is answered 429 with ``Retry-After`` without being checked, so waiting out the
answers is the only way on: at most one guess per ``MAX_WAIT_S`` once the waits are long,
however many addresses a guesser has. A right sign-in resets its address's count and the
console's; counts are forgotten after ``FORGET_S`` without failures.

No wait is forever: each ends on its own. And so that a guesser sharing the admin's address
(a proxy, 127.0.0.1) or hammering from everywhere cannot keep the admin out while the guessing
goes on, a browser that has signed in before carries a device cookie (OWASP's "device
cookies"), signed by the console with a key made from the admin's secret: its sign-ins are
judged by its own failures only, never by an address's or the console's.

Every decision is made under one lock, checking the credentials included, so that concurrent
guesses cannot all pass a check made before any of them was counted.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import logging
import math
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

log = logging.getLogger(__name__)

FREE_FAILURES: Final = 5  # wrong sign-ins from one address (or device) before any wait
GLOBAL_FREE_FAILURES: Final = 50  # wrong sign-ins in all before every address waits
BASE_WAIT_S: Final = 1.0
MAX_WAIT_S: Final = 300.0
FORGET_S: Final = 3 * MAX_WAIT_S  # a count with no failure for this long is dropped
MAX_TRACKED: Final = 10_000  # addresses and devices remembered at once (the quietest go first)
EVERYWHERE: Final = "*"


class Throttled(Exception):
    """A sign-in refused without being checked: the client must wait ``retry_after_s``."""

    def __init__(self, message: str, retry_after_s: int) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


@dataclass(frozen=True, slots=True)
class Verdict:
    right: bool  # the credentials were right
    tries_left: int  # wrong sign-ins the client has before one makes it wait


@dataclass
class _Count:
    failures: int = 0
    last_failure: float = 0.0

    def wait_until(self, free: int) -> float:
        """When the next sign-in may be checked (0: now)."""
        if self.failures < free:
            return 0.0
        wait_s: float = min(BASE_WAIT_S * 2.0 ** min(self.failures - free, 32), MAX_WAIT_S)
        return self.last_failure + wait_s


def client_key(address: str) -> str:
    """What failures are counted against: an IPv4 address, or an IPv6 address's /64."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)


class DeviceCookies:
    """Device cookies: ``<nonce>.<HMAC of the access key and nonce>``, valid for one access key."""

    def __init__(self, secret: str) -> None:
        self._key = hmac.new(secret.encode(), b"rocketspark console device cookie", hashlib.sha256).digest()

    def issue(self, access_key: str) -> str:
        nonce = secrets.token_urlsafe(16)
        return f"{nonce}.{self._mac(access_key, nonce)}"

    def device(self, cookie: str | None, access_key: str) -> str | None:
        """The device a valid cookie names for ``access_key``, else None."""
        nonce, _, mac = (cookie or "").partition(".")
        if not nonce or not hmac.compare_digest(mac.encode(), self._mac(access_key, nonce).encode()):
            return None
        return nonce

    def _mac(self, access_key: str, nonce: str) -> str:
        return hmac.new(self._key, f"{access_key}\0{nonce}".encode(), hashlib.sha256).hexdigest()[:32]


class SignInThrottle:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._counts: dict[str, _Count] = {}

    def attempt(self, address: str, device: str | None, check: Callable[[], bool]) -> Verdict:
        """Run ``check`` (the credentials) unless the client must wait (raises Throttled)."""
        if device is not None:
            key, scopes = f"device {device}", [(f"device {device}", FREE_FAILURES, "from this browser")]
        else:
            key = client_key(address)
            scopes = [
                (key, FREE_FAILURES, "from this address"),
                (EVERYWHERE, GLOBAL_FREE_FAILURES, "to this console from everywhere"),
            ]
        with self._lock:
            now = self._clock()
            self._forget(now)
            for scope, free, where in scopes:
                until = self._counts.get(scope, _Count()).wait_until(free)
                if until > now:
                    wait_s = max(1, math.ceil(until - now))
                    raise Throttled(_why(where, wait_s), wait_s)
            if check():
                for scope, _, _ in scopes:
                    self._counts.pop(scope, None)
                return Verdict(True, FREE_FAILURES)
            for scope, free, _ in scopes:
                count = self._counts.setdefault(scope, _Count())
                count.failures += 1
                count.last_failure = now
                if count.failures == free:
                    log.warning(
                        "console: %d wrong sign-ins from %s: sign-ins from there wait %.0f s from now on, doubling "
                        "with each further failure (up to %.0f s)",
                        free,
                        "everywhere" if scope == EVERYWHERE else scope,
                        BASE_WAIT_S,
                        MAX_WAIT_S,
                    )
            return Verdict(False, max(0, FREE_FAILURES - self._counts[key].failures))

    def _forget(self, now: float) -> None:
        if len(self._counts) < MAX_TRACKED:
            stale = [k for k, c in self._counts.items() if now - c.last_failure > FORGET_S]
        else:  # a flood of addresses: the quietest go (the console's own count stays)
            by_age = sorted((c.last_failure, k) for k, c in self._counts.items() if k != EVERYWHERE)
            stale = [k for _, k in by_age[: len(by_age) // 2]]
        for k in stale:
            del self._counts[k]


def _why(where: str, wait_s: int) -> str:
    return (
        f"too many wrong sign-ins {where}: try again in {wait_s} s (each wrong sign-in after "
        f"{FREE_FAILURES} doubles the wait, up to {MAX_WAIT_S:.0f} s; a browser that signed in here before is not "
        "held up by other clients' failures)"
    )
