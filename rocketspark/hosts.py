"""What kind of host an address names: loopback (this machine only) or every interface.

One rule for every server's configuration: a broker may not register an address its
nameservers' clients cannot reach, and security may run without TLS only on loopback."""

from __future__ import annotations

import ipaddress
from typing import Final

WILDCARDS: Final = frozenset({"", "0.0.0.0", "::", "[::]", "*"})


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 or "localhost"; a DNS name other than localhost is taken as not."""
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def is_wildcard(host: str) -> bool:
    """An address to listen on (every interface), never one to be reached at."""
    return host in WILDCARDS


def host_of(address: str) -> str:
    """``host`` of ``host:port`` (an IPv6 host may come in brackets)."""
    return address.rsplit(":", 1)[0].strip("[]")
