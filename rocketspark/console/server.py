"""The console's HTTP server: the page and its assets from the package, and a JSON API. Every
page address (``/topics/orders``, ``/messages/<id>`` ...) is answered with the one page, whose
script draws what the address names; which addresses and API routes there are is
:mod:`rocketspark.console.routes`' table, who is signed in :mod:`rocketspark.console.sessions`';
this module is the HTTP around them: headers, cookies, the checks below, errors to statuses.

Reading the cluster's shape needs nothing: anyone who can reach the console sees it (with
security on, what the admin sees: keep the console on 127.0.0.1, its default, or behind your
own access control); messages, whose bodies are data, need a session. A request must name the
console by the host it listens on (a loopback console answers only to loopback names), so a
page of another site cannot reach it through DNS rebinding. Changing anything (creating a
topic, resetting a group's offsets, resending a message) needs a session, opened by signing in
with the admin's access key and secret (the cluster's admin user with security on; otherwise
the console's own secret). The session is an HttpOnly, SameSite=Strict cookie (and Secure over
HTTPS); every change must also carry the ``X-Console`` header, which a page of another site
cannot send without a preflight this server never grants. Wrong sign-ins are slowed down
(:mod:`rocketspark.console.throttle`): past a few, a sign-in is answered 429 with
``Retry-After`` until an exponentially growing wait is over, while a browser that signed in
before (its device cookie) is judged by its own failures only.

When the cluster runs TLS the console serves HTTPS with the servers' certificate (no client
certificate asked: signing in is the console's access control), so the admin's secret never
crosses in the clear; a plain-HTTP request is answered 400, saying to use https.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import json
import logging
import re
import threading
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from importlib import resources
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, unquote, urlparse

from rocketspark.console import routes
from rocketspark.console.sessions import SESSION_S, Sessions
from rocketspark.console.throttle import Throttled
from rocketspark.console.throughput import Throughput
from rocketspark.errors import (
    BrokerNotExistError,
    ConfigError,
    IllegalTopicNameError,
    InvalidParameterError,
    MessageIllegalError,
    MessageNotFoundError,
    NoPermissionError,
    RocketSparkError,
    TopicExistAlreadyError,
    TopicNotExistError,
)
from rocketspark.metrics import http
from rocketspark.security.signing import Credentials
from rocketspark.security.tls import ServerTls

if TYPE_CHECKING:
    from rocketspark.client.admin import Admin

log = logging.getLogger(__name__)

COOKIE = "rocketspark_console"
DEVICE_COOKIE = "rocketspark_console_device"  # a browser that signed in before (see throttle)
DEVICE_S = 90 * 24 * 3600
ASSET = re.compile(r"[a-z][a-z0-9-]*\.(html|js|css)")  # a file of static/, by name
KINDS = {"html": "text/html", "js": "text/javascript", "css": "text/css"}
HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


class Console:
    """The console of one cluster: its admin client, who may change things, and the server."""

    def __init__(self, admin: Admin, signer: Credentials, *, sample_interval_s: float = 2.0) -> None:
        self.admin = admin
        self.signer = signer
        self.lock = threading.Lock()  # one admin call at a time
        self.sessions = Sessions(signer)
        self.throughput = Throughput(_Locked(admin, self.lock), sample_interval_s)
        self.httpd: http.Server | None = None
        self.url = ""
        self.secure = False  # served over HTTPS
        self.hosts: set[str] = set()  # the Host headers it answers to (empty: any)

    def serve(self, host: str = "127.0.0.1", port: int = 0, tls: ServerTls | None = None) -> str:
        """Listen on ``host:port`` (0: a free port); with ``tls``, HTTPS with its certificate
        (a client certificate is never asked, whatever ``tls.mutual`` says)."""
        console = self

        class Handler(_Handler):
            owner = console

        context = dataclasses.replace(tls, mutual=False).ssl_context() if tls is not None else None
        self.httpd = http.serve(host, port, Handler, context, "console")
        self.secure = tls is not None
        self.throughput.start()
        bound = http.port_of(self.httpd)
        if ipaddress.ip_address(host).is_loopback:
            self.hosts = {f"{name}:{bound}" for name in ("127.0.0.1", "localhost", "[::1]")}
        self.url = f"{'https' if self.secure else 'http'}://{host}:{bound}/"
        return self.url

    def close(self) -> None:
        self.throughput.close()
        if self.httpd is not None:
            http.stop(self.httpd)
            self.httpd = None
        self.admin.close()

    def call(self, view: Callable[..., Any], *args: Any) -> Any:
        """``view(admin, *args)``, one admin call at a time."""
        admin: routes.ConsoleAdmin = self.admin  # what the views may use of it
        with self.lock:
            return view(admin, *args)


class _Locked:
    """The admin, each call under the console's lock (for the throughput sampler's thread)."""

    def __init__(self, admin: Admin, lock: threading.Lock) -> None:
        self._admin, self._lock = admin, lock

    def brokers(self) -> dict[str, str]:
        with self._lock:
            return self._admin.brokers()

    def counters_at(self, address: str) -> dict[str, Any]:
        with self._lock:
            return self._admin.servers.counters_at(address)


class _Handler(BaseHTTPRequestHandler):
    owner: Console
    server_version = "rocketspark-console"

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("console: " + format, *args)

    # -- answers ---------------------------------------------------------------------------------

    def _send(
        self, status: int, body: bytes, kind: str, extra: dict[str, str] | None = None, cookies: tuple[str, ...] = ()
    ) -> None:
        self.send_response(status)
        for name, value in {**HEADERS, **(extra or {}), "Content-Type": kind}.items():
            self.send_header(name, value)
        for cookie in cookies:
            self.send_header("Set-Cookie", cookie)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def _json(
        self, value: Any, status: int = 200, extra: dict[str, str] | None = None, cookies: tuple[str, ...] = ()
    ) -> None:
        self._send(status, json.dumps(value, default=str).encode(), "application/json", extra, cookies)

    def _error(self, status: int, message: str, extra: dict[str, str] | None = None) -> None:
        self._json({"error": message}, status, extra)

    def _cookie(self, value: str, max_age_s: int, path: str = "/") -> str:
        secure = "; Secure" if self.owner.secure else ""
        return f"{value}; HttpOnly; SameSite=Strict; Path={path}; Max-Age={max_age_s}{secure}"

    def _token(self, cookie: str = COOKIE) -> str | None:
        for part in self.headers.get("Cookie", "").split(";"):
            name, _, value = part.strip().partition("=")
            if name == cookie:
                return value
        return None

    # -- reading ---------------------------------------------------------------------------------

    def _host_ok(self) -> bool:
        hosts = self.owner.hosts
        if hosts and self.headers.get("Host", "") not in hosts:
            self._error(421, "this console answers only to the address it listens on (see its URL)")
            return False
        return True

    def do_GET(self) -> None:
        if not self._host_ok():
            return
        path = unquote(urlparse(self.path).path)
        if path.startswith("/static/") and ASSET.fullmatch(path[8:]):
            self._asset(path[8:])
        elif path.startswith("/api/"):
            self._api_get(path[5:])
        elif path == "/favicon.ico":
            self._send(204, b"", "image/x-icon")
        elif routes.PAGE.fullmatch(path) or path == "/index.html":
            self._asset("index.html")  # every page is the one page: its script draws what the path names
        else:
            self._error(404, f"no page {path}: the pages are /, /topics, /messages, /groups, /producers and /dlq")

    def _asset(self, name: str) -> None:
        try:
            body = resources.files("rocketspark.console").joinpath("static", name).read_bytes()
        except FileNotFoundError:
            self._error(404, f"no file /static/{name}")
            return
        self._send(200, body, KINDS[name.rpartition(".")[2]] + "; charset=utf-8")

    def _api_get(self, path: str) -> None:
        owner = self.owner
        try:
            if path == "session":
                admin = owner.sessions.signed_in(self._token())
                self._json({"admin": admin, "user": owner.signer.access_key if admin else None})
                return
            found = routes.find(routes.GETS, path)
            if found is None:
                self._error(404, f"no API /api/{path}")
                return
            route, match = found
            if route.signed_in and not owner.sessions.signed_in(self._token()):  # a body is the cluster's data
                self._error(403, "sign in as the admin to look messages up")
                return
            self._json(route.handler(owner, match, parse_qs(urlparse(self.path).query)))
        except RocketSparkError as exc:
            self._error(_status(exc), exc.message)
        except Exception as exc:  # never a dropped connection: the page shows what went wrong
            log.exception("console: GET %s failed", self.path)
            self._error(500, f"the console failed: {exc}")

    # -- changing --------------------------------------------------------------------------------

    def _body(self) -> dict[str, Any]:
        length = self.headers.get("Content-Length") or "0"
        if not length.isdigit() or int(length) > 65536:
            raise InvalidParameterError("the request body must have a Content-Length of at most 64 KiB")
        size = int(length)
        try:
            body = json.loads(self.rfile.read(size) or b"{}")
        except ValueError:
            raise InvalidParameterError("the request body is not JSON") from None
        if not isinstance(body, dict):
            raise InvalidParameterError("the request body must be a JSON object")
        return body

    def _changing(self) -> bool:
        """A change must come from the console's own page (the header) and a session."""
        if not self._host_ok():
            return False
        if self.headers.get("X-Console") != "1":
            self._error(403, "changes must come from the console page (X-Console header missing)")
            return False
        if urlparse(self.path).path != "/api/session" and not self.owner.sessions.signed_in(self._token()):
            self._error(401, "sign in as admin to change anything; reading needs no sign-in")
            return False
        return True

    def do_POST(self) -> None:
        if not self._changing():
            return
        route = urlparse(self.path).path
        try:
            body = self._body()
            if route == "/api/session":
                self._sign_in(body)
                return
            for pattern, change in routes.POSTS:
                match = pattern.fullmatch(unquote(route[len("/api/") :])) if route.startswith("/api/") else None
                if match is not None:
                    self._json(change(self.owner, match, body))
                    return
            self._error(404, f"no API {route}")
        except Throttled as exc:
            self._error(429, str(exc), {"Retry-After": str(exc.retry_after_s)})
        except PermissionError as exc:
            self._error(401, str(exc))
        except RocketSparkError as exc:
            self._error(_status(exc), exc.message)
        except Exception as exc:  # never a dropped connection: the page shows what went wrong
            log.exception("console: POST %s failed", self.path)
            self._error(500, f"the console failed: {exc}")

    def _sign_in(self, body: dict[str, Any]) -> None:
        token, device = self.owner.sessions.sign_in(
            str(body.get("accessKey", "")),
            str(body.get("secret", "")),
            self.client_address[0],
            self._token(DEVICE_COOKIE),
        )
        cookies = [self._cookie(f"{COOKIE}={token}", SESSION_S)]  # first: what scripts take as the session
        if device is not None:
            cookies.append(self._cookie(f"{DEVICE_COOKIE}={device}", DEVICE_S, "/api/session"))
        self._json({"admin": True}, cookies=tuple(cookies))

    def do_DELETE(self) -> None:
        if not self._host_ok():
            return
        if self.headers.get("X-Console") != "1":
            self._error(403, "changes must come from the console page (X-Console header missing)")
            return
        if urlparse(self.path).path == "/api/session":
            self.owner.sessions.sign_out(self._token())
            self._json({"admin": False}, cookies=(self._cookie(f"{COOKIE}=", 0),))
        else:
            self._error(404, f"no API {self.path}")


_NOT_FOUND = (TopicNotExistError, BrokerNotExistError, MessageNotFoundError)
_BAD_INPUT = (InvalidParameterError, IllegalTopicNameError, TopicExistAlreadyError, MessageIllegalError)


def _status(exc: RocketSparkError) -> int:
    """A missing thing is 404, bad input 400, a refusal 403, anything else the cluster's (502)."""
    if isinstance(exc, _NOT_FOUND):
        return int(HTTPStatus.NOT_FOUND)
    if isinstance(exc, _BAD_INPUT):
        return int(HTTPStatus.BAD_REQUEST)
    if isinstance(exc, NoPermissionError):
        return int(HTTPStatus.FORBIDDEN)
    return int(HTTPStatus.BAD_GATEWAY)


def start_console(
    nameserver: str,
    client_options: dict[str, Any],
    signer: Credentials,
    host: str = "127.0.0.1",
    port: int = 0,
    tls: ServerTls | None = None,
) -> Console:
    """A console for the cluster at ``nameserver``, serving on ``host:port`` (0: a free port),
    over HTTPS with ``tls`` (the cluster servers' certificate)."""
    from rocketspark.client.admin import Admin

    admin = Admin(nameserver, **client_options)
    console = Console(admin, signer)
    try:
        console.serve(host, port, tls)
    except OSError as exc:
        admin.close()
        raise ConfigError(f"the console cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    return console
