"""A client's transport failures in terms a user can act on: a bad address, a refused or
timed-out connection, a name that does not resolve, and TLS set up on one side only or with
the wrong CA or certificate (:mod:`rocketspark.remoting.client` raises them)."""

from __future__ import annotations

import socket
import ssl

from rocketspark.errors import ConnectError, RocketSparkError, TlsError
from rocketspark.remoting.closed import Closed
from rocketspark.security.tls import ClientTls

CONNECT_TIMEOUT_S = 3.0


def transport_error(
    cause: BaseException, address: str, peer: str, tls: ClientTls | None, *, answered: bool
) -> RocketSparkError:
    """Turn a failure of the connection into the rocketspark error a user can act on.
    ``answered``: the peer answered on this connection before; only if it never did is a
    connection closed at once read as TLS refusing it (one that answered and closes now is
    restarting, not misconfigured)."""
    if isinstance(cause, RocketSparkError):
        return cause
    if isinstance(cause, ssl.SSLError) or (not answered and isinstance(cause, Closed | ConnectionResetError)):
        problem = _tls_problem(cause, peer, tls, answered)
        if problem is not None:
            return TlsError(f"cannot connect to {peer} at {address}: {problem}", address=address)
    if isinstance(cause, ConnectionRefusedError):
        return ConnectError(f"cannot reach {peer} at {address} (connection refused). Is it running?", address=address)
    if isinstance(cause, socket.timeout | TimeoutError):
        return ConnectError(
            f"cannot reach {peer} at {address}: it did not accept a connection within {CONNECT_TIMEOUT_S:g} s. Is it "
            "running, and is the address right?",
            address=address,
        )
    if isinstance(cause, socket.gaierror):
        return ConnectError(
            f"cannot reach {peer} at {address}: the host name does not resolve ({cause})", address=address
        )
    if isinstance(cause, Closed):
        return ConnectError(f"{peer} at {address}: {cause}", address=address)
    return ConnectError(
        f"cannot reach {peer} at {address} ({type(cause).__name__}: {cause}). Is it running?", address=address
    )


def _tls_problem(cause: BaseException, peer: str, tls: ClientTls | None, answered: bool) -> str | None:
    """What went wrong in a TLS handshake, in terms of the settings that fix it; None when the
    failure is not one. A server that refuses the client's certificate (or its lack of one)
    does so after the handshake in TLS 1.3: the refusal is the connection's first read."""
    if isinstance(cause, ssl.SSLCertVerificationError):
        if "hostname" in str(cause).lower() or "ip address mismatch" in str(cause).lower():
            return f"its certificate is not valid for this host name or address ({cause.verify_message})"
        trust = f"the CA in {tls.ca_file}" if tls is not None and tls.ca_file else "the system's CAs"
        return (
            f"its certificate is not signed by a CA this client trusts ({trust}): set tls_ca_file to the CA "
            "that signed the cluster's certificates"
        )
    if isinstance(cause, ssl.SSLError) and "WRONG_VERSION_NUMBER" in str(cause).upper().replace(" ", "_"):
        return f"the {peer} does not speak TLS: connect without tls, or turn tls_enable on at the {peer}"
    if answered:
        return f"the TLS connection failed ({cause})" if isinstance(cause, ssl.SSLError) else None
    if tls is None:
        return (
            f"the {peer} closed the connection at once, as a TLS server does with a plaintext client: "
            "connect with TLS and the cluster's CA: tls=True, tls_ca_file=... (Spark: options tls, tlsCaFile; "
            "rocketspark admin: --tls --tls-ca-file; anywhere: ROCKETSPARK_TLS_CA_FILE)"
        )
    if not tls.cert_file:
        return _NO_CLIENT_CERT.format(peer=peer)
    return (
        f"the {peer} closed the TLS connection during the handshake: it does not accept the client "
        f"certificate {tls.cert_file} (is it signed by the CA the {peer} trusts?)"
    )


_NO_CLIENT_CERT = (
    "the {peer} closed the TLS connection during the handshake, as a server with mutual TLS does with a client "
    "that shows no certificate: give tls_cert_file and tls_key_file (a certificate signed by the cluster's CA)"
)
