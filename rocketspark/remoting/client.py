"""Client side of the remoting layer: sync, async and oneway calls with a deadline each.

One gRPC channel per peer address, created lazily and owned by the process that created it:
gRPC channels do not survive ``fork``, so a forked child (a Spark Python worker) gets fresh
channels instead of inheriting broken ones.

This module is the one place on the client where transport failures become rocketspark
errors (``translate_rpc_error``) and error responses become exceptions (``check``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import threading
import weakref
from collections.abc import Callable, Iterator
from typing import Any, Protocol

import grpc

from rocketspark.errors import (
    ConnectError,
    InvalidAddressError,
    RequestTimeoutError,
    RocketSparkError,
    TlsError,
    error_for_response,
)
from rocketspark.protocol import service
from rocketspark.protocol.codes import Flag, RequestCode, ResponseCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.remoting.channel import MuxStream
from rocketspark.security.signing import Credentials, Signer
from rocketspark.security.tls import ClientTls

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_MS = 3000  # RocketMQ's mqClientApiTimeout


def parse_address(address: str) -> tuple[str, int]:
    """Split ``host:port``; anything else is a clear error naming the bad value."""
    host, sep, port = address.strip().rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise InvalidAddressError(f'"{address}" is not a valid address: expected host:port, e.g. 127.0.0.1:9876')
    return host, int(port)


def translate_rpc_error(
    err: grpc.RpcError, address: str, peer: str, tls: ClientTls | None = None, *, first_contact: bool = True
) -> RocketSparkError:
    """Turn a gRPC failure into the rocketspark error a user can act on. ``first_contact``: the
    peer never answered this client; only then is a connection closed at once read as TLS
    refusing it (a peer that answered before and closes now is restarting, not misconfigured)."""
    code = err.code() if hasattr(err, "code") else None
    details = (err.details() if hasattr(err, "details") else "") or ""
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return RequestTimeoutError(f"{peer} at {address} did not answer before the deadline", address=address)
    tls_problem = _tls_problem(details, peer, tls, first_contact)
    if tls_problem is not None:
        return TlsError(f"cannot connect to {peer} at {address}: {tls_problem}", address=address)
    if code == grpc.StatusCode.UNAVAILABLE:
        reason = "connection refused" if "refused" in details.lower() else details or "unavailable"
        return ConnectError(f"cannot reach {peer} at {address} ({reason}). Is it running?", address=address)
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
        return ConnectError(f"{peer} at {address} refused the request as too large: {details}", address=address)
    return ConnectError(f"call to {peer} at {address} failed: {code} {details}", address=address)


def _tls_problem(details: str, peer: str, tls: ClientTls | None, first_contact: bool) -> str | None:
    """What went wrong in a TLS handshake, in terms of the settings that fix it; None when the
    failure is not one (gRPC reports handshakes only in its details text)."""
    if "handshake failed" not in details.lower():
        if first_contact and "failed to connect" in details and "Socket closed" in details:  # closed while connecting
            if tls is None:
                return (
                    f"the {peer} closed the connection at once, as a TLS server does with a plaintext client: "
                    "connect with TLS and the cluster's CA: tls=True, tls_ca_file=... (Spark: options tls, tlsCaFile; "
                    "rocketspark admin: --tls --tls-ca-file; anywhere: ROCKETSPARK_TLS_CA_FILE)"
                )
            if not tls.cert_file:
                return (
                    f"the {peer} closed the TLS connection during the handshake, as a server with mutual TLS does "
                    "with a client that shows no certificate: give tls_cert_file and tls_key_file (a certificate "
                    "signed by the cluster's CA)"
                )
            return (
                f"the {peer} closed the TLS connection during the handshake: it does not accept the client "
                f"certificate {tls.cert_file} (is it signed by the CA the {peer} trusts?)"
            )
        return None
    if "WRONG_VERSION_NUMBER" in details:
        return f"the {peer} does not speak TLS: connect without tls, or turn tls_enable on at the {peer}"
    if any(s in details for s in ("CERTIFICATE_VERIFY_FAILED", "certificate signature failure", "issuer")):
        trust = f"the CA in {tls.ca_file}" if tls is not None and tls.ca_file else "the system's CAs"
        return (
            f"its certificate is not signed by a CA this client trusts ({trust}): set tls_ca_file to the CA "
            "that signed the cluster's certificates"
        )
    if "Peer name" in details or "not in peer certificate" in details:
        return f"its certificate is not valid for this host name or address ({details})"
    return f"the TLS handshake failed ({details})"


def check(response: RemotingCommand, *ok_codes: int) -> RemotingCommand:
    """Return ``response`` if its code is SUCCESS or one of ``ok_codes``; raise otherwise."""
    if response.code == ResponseCode.SUCCESS or response.code in ok_codes:
        return response
    name = response.ext.get("error")
    raise error_for_response(response.code, response.remark, name if isinstance(name, str) else None, response.ext)


class _Peer:
    __slots__ = ("channel", "lock", "mux", "open_mux", "stream")

    def __init__(self, address: str, tls: ClientTls | None) -> None:
        options = list(service.CHANNEL_OPTIONS)
        self.channel = (
            grpc.insecure_channel(address, options=options)
            if tls is None
            else grpc.secure_channel(address, tls.grpc_credentials(), options=options)
        )
        self.stream = self.channel.unary_stream(service.STREAM_PATH)
        self.open_mux = self.channel.stream_stream(service.CHANNEL_PATH)
        self.mux: MuxStream | None = None
        self.lock = threading.Lock()

    def muxed(self, translate: Callable[[grpc.RpcError], RocketSparkError]) -> MuxStream:
        """The peer's request stream, (re)opened when missing or broken."""
        mux = self.mux
        if mux is None or not mux.alive:
            with self.lock:
                mux = self.mux
                if mux is None or not mux.alive:
                    if mux is not None:
                        mux.close()  # broken: release its request thread before replacing it
                    mux = self.mux = MuxStream(self.open_mux, translate)
        return mux

    def close(self) -> None:
        if self.mux is not None:
            self.mux.close()
        self.channel.close()


class LocalPeer(Protocol):
    """The server a client runs inside (a broker's v2 endpoint calling its own broker): its
    requests to ``address()`` skip gRPC, the network and the signature, and still meet the
    server's request shapes and handlers (``Dispatcher.serve_local``)."""

    def address(self) -> str: ...
    def submit(self, request: RemotingCommand, timeout_s: float) -> concurrent.futures.Future[RemotingCommand]: ...


class RemotingClient:
    """Calls RemotingCommands on peers by address. Thread-safe; one per client object.

    With ``credentials`` every request is signed here, the one place a request leaves (see
    :mod:`rocketspark.security.signing`)."""

    def __init__(
        self,
        *,
        peer_kind: str = "broker",
        default_timeout_ms: int = DEFAULT_TIMEOUT_MS,
        credentials: Credentials | None = None,
        tls: ClientTls | None = None,
    ) -> None:
        self.peer_kind = peer_kind
        self.tls = tls
        self.default_timeout_ms = default_timeout_ms
        self.signer = Signer(credentials) if credentials is not None else None
        self._peers: dict[str, _Peer] = {}
        self._lock = threading.Lock()
        self._closed = False
        self._oneway: set[concurrent.futures.Future[RemotingCommand]] = set()
        self._answered: set[str] = set()  # peers that answered once: a close from them is no TLS refusal
        self.local: LocalPeer | None = None  # the server this client runs in, called without the network
        _CLIENTS.add(self)

    @property
    def connected_peers(self) -> list[str]:
        """The addresses this client holds a channel to: opened on first call, kept until
        ``close()``; a forked child starts with none (its parent's do not work there)."""
        with self._lock:
            return list(self._peers)

    def _forget_parent(self) -> None:
        """In a forked child: the parent's channels, locks and calls are unusable here."""
        self._lock = threading.Lock()
        self._peers = {}
        self._oneway = set()

    def _peer(self, address: str) -> _Peer:
        peer = self._peers.get(address)
        if peer is None:
            parse_address(address)
            with self._lock:
                if self._closed:
                    raise ConnectError(f"client is closed; cannot call {address}")
                peer = self._peers.get(address)
                if peer is None:
                    peer = self._peers[address] = _Peer(address, self.tls)
        return peer

    def _submit(
        self, address: str, request: RemotingCommand, timeout_ms: int | None, peer: str | None
    ) -> concurrent.futures.Future[RemotingCommand]:
        kind = peer or self.peer_kind
        timeout_s = (timeout_ms or self.default_timeout_ms) / 1000

        def translate(err: grpc.RpcError) -> RocketSparkError:
            return translate_rpc_error(err, address, kind, self.tls, first_contact=address not in self._answered)

        code = request.code  # the deadline heap keeps ``expire``: it must not hold the request body
        local = self.local
        if local is not None and address == local.address():
            return local.submit(request, timeout_s)
        if self.signer is not None:
            request.ext.update(self.signer.headers())

        def expire() -> RocketSparkError:
            return RequestTimeoutError(
                f"{kind} at {address} did not answer request code {code} within {timeout_s:g} s", address=address
            )

        try:
            mux = self._peer(address).muxed(translate)
        except RocketSparkError as exc:
            failed: concurrent.futures.Future[RemotingCommand] = concurrent.futures.Future()
            failed.set_exception(exc)
            return failed
        future = mux.submit(request, timeout_s, expire)
        if address not in self._answered:
            future.add_done_callback(lambda done: self._heard_from(address, done))
        return future

    def _heard_from(self, address: str, done: concurrent.futures.Future[RemotingCommand]) -> None:
        if not done.cancelled() and done.exception() is None:
            self._answered.add(address)

    def invoke(
        self, address: str, request: RemotingCommand, timeout_ms: int | None = None, *, peer: str | None = None
    ) -> RemotingCommand:
        """Sync call: wait for the response or raise at the deadline."""
        return self._submit(address, request, timeout_ms, peer).result()

    def invoke_async(
        self, address: str, request: RemotingCommand, timeout_ms: int | None = None, *, peer: str | None = None
    ) -> concurrent.futures.Future[RemotingCommand]:
        """Async call: a future that resolves to the response or to a translated error (a
        timeout included: it fails at its deadline even if nobody waits on it)."""
        return self._submit(address, request, timeout_ms, peer)

    async def invoke_await(
        self, address: str, request: RemotingCommand, timeout_ms: int | None = None
    ) -> RemotingCommand:
        """For code on an event loop (a broker calling its master or the controller): await
        the response, or the translated error, without blocking the loop or a thread."""
        return await asyncio.wrap_future(self._submit(address, request, timeout_ms, None))

    def invoke_oneway(self, address: str, request: RemotingCommand, timeout_ms: int | None = None) -> None:
        """Fire and forget: the peer acknowledges at once and failures are only logged.

        ``close()`` waits (briefly) for oneway calls still in flight, so that closing a client
        right after a oneway send does not cancel it.
        """
        request.flag |= Flag.ONEWAY
        future = self.invoke_async(address, request, timeout_ms)
        with self._lock:
            self._oneway.add(future)

        def report(done: concurrent.futures.Future[RemotingCommand]) -> None:
            with self._lock:
                self._oneway.discard(done)
            if done.exception() is not None:
                log.debug("oneway call to %s failed: %s", address, done.exception())

        future.add_done_callback(report)

    def open_push_stream(self, address: str, client_id: str) -> ResponseStream:
        """Open the server-push channel; iterate it in a thread, stop it with ``cancel()``."""
        request = RemotingCommand.request(RequestCode.OPEN_PUSH_STREAM, {"clientId": client_id})
        return self.invoke_stream(address, request, None)

    def invoke_stream(
        self, address: str, request: RemotingCommand, timeout_ms: int | None, *, peer: str | None = None
    ) -> ResponseStream:
        """A server-streaming call: iterate the responses; the deadline covers the whole stream."""
        if self.signer is not None:
            request.ext.update(self.signer.headers())
        call = self._peer(address).stream(request.encode(), timeout=None if timeout_ms is None else timeout_ms / 1000)
        return ResponseStream(call, address, peer or self.peer_kind, self.tls)

    def close(self, *, oneway_grace_s: float = 2.0) -> None:
        with self._lock:
            pending = list(self._oneway)
        concurrent.futures.wait(pending, timeout=oneway_grace_s)
        with self._lock:
            self._closed = True
            peers, self._peers = self._peers, {}
        for peer in peers.values():
            peer.close()


class ResponseStream(Iterator[RemotingCommand]):
    """Responses of a server-streaming call. Ends (StopIteration) when the server ends it, when
    it is cancelled, or at its deadline; other failures raise translated errors."""

    def __init__(self, call: Any, address: str, peer_kind: str, tls: ClientTls | None) -> None:
        self._call = call
        self._address = address
        self._peer_kind = peer_kind
        self._tls = tls

    def __next__(self) -> RemotingCommand:
        try:
            raw = next(self._call)
        except grpc.RpcError as err:
            if err.code() in (grpc.StatusCode.CANCELLED, grpc.StatusCode.DEADLINE_EXCEEDED):
                raise StopIteration from None
            raise translate_rpc_error(err, self._address, self._peer_kind, self._tls) from None
        return RemotingCommand.decode(raw)

    def cancel(self) -> None:
        self._call.cancel()


_CLIENTS: weakref.WeakSet[RemotingClient] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for client in list(_CLIENTS):
        client._forget_parent()


os.register_at_fork(after_in_child=_after_fork_in_child)
