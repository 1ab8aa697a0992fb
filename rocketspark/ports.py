"""Ports a local server must be known by before it starts (the controller's Raft, the v2
endpoint, the metrics), picked where no outgoing connection can take them first."""

from __future__ import annotations

import random
import socket
from pathlib import Path


def free_port() -> int:
    """A port free now, for a server whose address must be known before it starts (the
    controller's Raft, the v2 endpoint). Taken below the kernel's ephemeral range: a port
    from there could be given to some outgoing connection before the server binds it."""
    low = ephemeral_low()
    for _ in range(200):
        port = random.randrange(PRIVATE_PORTS_FROM, low)
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as probe:  # the range below is crowded: any free port
        probe.bind(("127.0.0.1", 0))
        chosen: int = probe.getsockname()[1]
        return chosen


PRIVATE_PORTS_FROM = 20_000


def ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (Linux; 32768 elsewhere)."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    return max(low, PRIVATE_PORTS_FROM + 1000)
