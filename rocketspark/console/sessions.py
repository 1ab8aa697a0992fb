"""The console's sessions: signing in as the admin (checked in constant time, wrong tries
slowed down by :mod:`rocketspark.console.throttle`), the session tokens the cookies carry,
and signing out. The HTTP side (cookies, headers) is the server's."""

from __future__ import annotations

import hmac
import secrets
import threading
import time

from rocketspark.console.throttle import DeviceCookies, SignInThrottle
from rocketspark.security.signing import Credentials

SESSION_S = 8 * 3600


class Sessions:
    """Who is signed in: session token -> expiry, for the admin ``signer`` names."""

    def __init__(self, signer: Credentials) -> None:
        self.signer = signer
        self.sessions: dict[str, float] = {}  # token -> expiry (epoch seconds)
        self._sessions_lock = threading.Lock()
        self.throttle = SignInThrottle()
        self.devices = DeviceCookies(signer.secret_key)

    def sign_in(
        self, access_key: str, secret: str, address: str = "", device_cookie: str | None = None
    ) -> tuple[str, str | None]:
        """A new session for the admin, and a device cookie to set (None: the browser's is
        valid); PermissionError for wrong credentials, Throttled while ``address`` (or the
        device) must wait after wrong sign-ins."""

        def right() -> bool:
            return hmac.compare_digest(access_key.encode(), self.signer.access_key.encode()) & hmac.compare_digest(
                secret.encode(), self.signer.secret_key.encode()
            )

        device = self.devices.device(device_cookie, access_key)
        verdict = self.throttle.attempt(address, device, right)
        if not verdict.right:
            left = verdict.tries_left
            more = f"{left} more before each wrong one makes you wait" if left else "the next one must wait"
            raise PermissionError(f"wrong access key or secret: sign in as the cluster's admin ({more})")
        return self._open_session(), None if device is not None else self.devices.issue(access_key)

    def _open_session(self) -> str:
        token = secrets.token_urlsafe(32)
        now = time.time()
        with self._sessions_lock:
            for old in [t for t, expiry in self.sessions.items() if expiry <= now]:
                del self.sessions[old]
            self.sessions[token] = now + SESSION_S
        return token

    def sign_out(self, token: str | None) -> None:
        with self._sessions_lock:
            self.sessions.pop(token or "", None)

    def signed_in(self, token: str | None) -> bool:
        with self._sessions_lock:
            expiry = self.sessions.get(token or "")
        return expiry is not None and expiry > time.time()
