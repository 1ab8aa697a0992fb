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
        if port in _GIVEN:  # handed out already, maybe not bound yet (a cluster picks several at once)
            continue
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            _GIVEN.add(port)
            return port
    with socket.socket() as probe:  # the range below is crowded: any free port
        probe.bind(("127.0.0.1", 0))
        chosen: int = probe.getsockname()[1]
        return chosen


PRIVATE_PORTS_FROM = 20_000
_GIVEN: set[int] = set()  # ports this process handed out: never twice (a few thousand at most)


def ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (Linux; 32768 elsewhere)."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    return max(low, PRIVATE_PORTS_FROM + 1000)


def metrics_port_plan(base: int, key: str, groups: list[str], nameservers: int, replicas: int) -> int:
    """The metrics port of a local cluster's server when they are given from ``base`` on
    (``cluster up --metrics-port``): the nameservers first (``base``, ``base + 1``, ...), then
    the brokers in order (``broker-a``, ``broker-b``, ...), then, with replica groups, each
    group's replica 1 in the same order, then replica 2, ... (replica 0 is where a broker is
    without replicas). ``key`` is the server's name (``nameserver-1``, ``broker-b-r1``); 0 for
    a broker added later (it takes a free port)."""
    if key == "nameserver" or key.startswith("nameserver-"):
        return base + (0 if key == "nameserver" else int(key.rsplit("-", 1)[1]))
    group, replica_id = key, 0
    if replicas > 1 and key.rsplit("-", 1)[-1].startswith("r"):
        group, replica = key.rsplit("-", 1)
        replica_id = int(replica[1:])
    if group not in groups:  # a broker added after the start: a free port
        return 0
    return base + nameservers + replica_id * len(groups) + groups.index(group)
