"""Ports picked before a server starts: never the same one twice in a process, even before
the first is bound (a cluster picks its brokers' v2 and metrics ports together)."""

from __future__ import annotations

from rocketspark.ports import PRIVATE_PORTS_FROM, ephemeral_low, free_port


def test_ports_picked_together_are_all_different_and_below_the_ephemeral_range() -> None:
    ports = [free_port() for _ in range(300)]
    assert len(set(ports)) == len(ports)
    assert all(PRIVATE_PORTS_FROM <= p < ephemeral_low() for p in ports)
