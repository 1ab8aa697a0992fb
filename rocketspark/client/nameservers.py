"""The nameservers a client talks to: their addresses, and calls that move on when one fails.

Addresses come from the argument or ``ROCKETSPARK_NAMESRV`` (the broker's ``__main__`` reads
them the same way). One nameserver, picked at random, is used until it cannot be reached;
the others are then tried in turn, and the one that answered becomes the sticky one (whoever
listens to ``on_change``, the route-push subscriber, follows it).

A route lookup (``lookup``) takes no single nameserver's "no such topic" as final: nameservers
share nothing, and one that restarted or missed a registration may not know a topic the
others do. It asks the others in turn, and concludes the topic is missing only when every
nameserver it reached said so. A restarted nameserver that has not yet heard from its brokers
answers "not ready"; while every nameserver reached is not ready, the lookup asks again until
its deadline.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable

from rocketspark.errors import (
    ConnectError,
    NameserverNotReadyError,
    NoNameServerError,
    RequestTimeoutError,
    TlsError,
    TopicNotExistError,
)
from rocketspark.hosts import parse_address
from rocketspark.protocol.command import RemotingCommand
from rocketspark.remoting.client import RemotingClient, check

ENV_NAMESRV = "ROCKETSPARK_NAMESRV"
NOT_READY_PAUSE_S = 0.2  # between rounds of asking while every nameserver reached is not ready


def resolve_nameservers(nameserver: str | list[str] | tuple[str, ...] | None) -> list[str]:
    """Addresses from the argument, else ``ROCKETSPARK_NAMESRV``; none at all is an error."""
    if nameserver is None:
        nameserver = os.environ.get(ENV_NAMESRV, "")
    if isinstance(nameserver, str):
        nameserver = nameserver.replace(";", ",").split(",")
    addresses = [a.strip() for a in nameserver if a and a.strip()]
    if not addresses:
        raise NoNameServerError(
            f"No name server address, please set it: pass nameserver='host:port' or set the {ENV_NAMESRV} "
            "environment variable (e.g. 127.0.0.1:9876)"
        )
    for address in addresses:
        parse_address(address)
    return addresses


class Nameservers:
    """Calls to a client's nameservers: the sticky one first, the others when it fails."""

    def __init__(
        self,
        nameservers: str | list[str] | tuple[str, ...] | None,
        remoting: RemotingClient,
        on_change: Callable[[], None] = lambda: None,
    ) -> None:
        self.addresses = resolve_nameservers(nameservers)
        self.remoting = remoting
        self._current = random.randrange(len(self.addresses))
        self.on_change = on_change  # the sticky one changed

    @property
    def current(self) -> str:
        return self.addresses[self._current % len(self.addresses)]

    def replace(self, nameservers: str | list[str]) -> None:
        """A new address list: pick a new sticky one at random."""
        addresses = resolve_nameservers(nameservers)
        if addresses == self.addresses:
            return
        self.addresses = addresses
        self._current = random.randrange(len(addresses))
        self.on_change()

    def call(self, request: RemotingCommand, *ok: int, timeout_ms: int | None = None) -> RemotingCommand:
        """Send to the sticky nameserver, moving to the next one when it cannot be reached;
        raise for an answer whose code is not SUCCESS or one of ``ok``."""
        errors: list[str] = []
        kinds: set[type[ConnectError | RequestTimeoutError]] = set()
        for attempt in range(len(self.addresses)):
            index = (self._current + attempt) % len(self.addresses)
            try:
                response = self.remoting.invoke(self.addresses[index], request, timeout_ms, peer="nameserver")
            except (ConnectError, RequestTimeoutError) as exc:
                errors.append(exc.message)
                kinds.add(type(exc))
                continue
            if index != self._current % len(self.addresses):
                self._current = index
                self.on_change()
            return check(response, *ok)
        # Every one refusing our TLS is a setting to change, not an outage: keep its class.
        error = TlsError if kinds == {TlsError} else ConnectError
        raise error("no nameserver answered: " + "; ".join(errors), nameservers=self.addresses)

    def call_at(
        self, address: str, request: RemotingCommand, *ok: int, timeout_ms: int | None = None
    ) -> RemotingCommand:
        """Send to one given nameserver (changes go to every one of them); checked like ``call``."""
        return check(self.remoting.invoke(address, request, timeout_ms, peer="nameserver"), *ok)

    def lookup(self, request: RemotingCommand, timeout_ms: int | None = None) -> RemotingCommand:
        """A route query answered by the first nameserver that knows the topic (see the module
        docstring). Raises TopicNotExistError naming every nameserver that said so, or
        NameserverNotReadyError when only not-ready ones answered until the deadline."""
        deadline = time.monotonic() + (timeout_ms or self.remoting.default_timeout_ms) / 1000
        while True:
            missing: list[str] = []
            not_ready: list[str] = []
            unreachable: list[str] = []
            kinds: set[type[ConnectError | RequestTimeoutError]] = set()
            for attempt in range(len(self.addresses)):
                index = (self._current + attempt) % len(self.addresses)
                address = self.addresses[index]
                try:
                    response = check(self.remoting.invoke(address, request, timeout_ms, peer="nameserver"))
                except (ConnectError, RequestTimeoutError) as exc:
                    unreachable.append(exc.message)
                    kinds.add(type(exc))
                    continue
                except TopicNotExistError:
                    missing.append(address)
                    continue
                except NameserverNotReadyError as exc:
                    not_ready.append(exc.message)
                    continue
                if index != self._current % len(self.addresses):
                    self._current = index
                    self.on_change()
                return response
            if missing:
                missing.sort()
                said = (
                    f"the nameserver at {missing[0]} knows"
                    if len(missing) == 1
                    else (f"the nameservers at {', '.join(missing)} know")
                )
                others = len(self.addresses) - len(missing)
                also = (
                    f" ({others} other{' was' if others == 1 else 's were'} not ready or unreachable)" if others else ""
                )
                raise TopicNotExistError(f"{said} no such topic{also}", nameservers=missing)
            if not not_ready:
                error = TlsError if kinds == {TlsError} else ConnectError
                raise error("no nameserver answered: " + "; ".join(unreachable), nameservers=self.addresses)
            if time.monotonic() + NOT_READY_PAUSE_S >= deadline:
                raise NameserverNotReadyError("; ".join(not_ready + unreachable), nameservers=self.addresses)
            time.sleep(NOT_READY_PAUSE_S)
