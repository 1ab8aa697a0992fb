"""Addresses: ``parse_address`` splits ``host:port`` (a bad one is an error naming it); and
what kind of host an address names: loopback (this machine only) or every interface.

One rule for every server's configuration: a broker may not register an address its
nameservers' clients cannot reach, and security may run without TLS only on loopback."""

from __future__ import annotations

import ipaddress
from typing import Final

from rocketspark.errors import InvalidAddressError

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


def parse_address(address: str) -> tuple[str, int]:
    """Split ``host:port``; anything else is a clear error naming the bad value."""
    host, sep, port = address.strip().rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise InvalidAddressError(f'"{address}" is not a valid address: expected host:port, e.g. 127.0.0.1:9876')
    return host.strip("[]"), int(port)
