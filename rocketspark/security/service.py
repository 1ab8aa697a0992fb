"""The user-table requests both servers serve: read the table, and offer a newer one.

``rocketspark admin user``/``acl`` read the table from one server, change it, and offer the
result, one version on, to every broker and nameserver (``AUTH_PUT_TABLE``); a server keeps
it only if it is newer than its own. Only super users (and the cluster) may send either
(``rules.SUPER_ONLY``): the table holds secret keys. With security off both are refused: no
guard checks who asks, and a table pushed then would take effect the day security is on.

A server that missed a change catches up when it next registers (``reconcile``): a broker's
registration carries its table version, the nameserver answers with its own, and the broker
fetches the newer table or offers its own. A slave takes its master's table with the rest of
its metadata (``broker.ha.metadata``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from rocketspark.errors import NoPermissionError
from rocketspark.protocol.bodies import pack, unpack
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.remoting.server import Dispatcher
from rocketspark.security.acl import AclTable
from rocketspark.security.store import AclStore

log = logging.getLogger(__name__)
VERSION_FIELD = "aclVersion"  # a registration's and its answer's table version
Invoke = Callable[[str, RemotingCommand], RemotingCommand]  # a call that raises for a failed answer


def serve_acl(dispatcher: Dispatcher, store: AclStore, *, enabled: bool) -> None:
    """``enabled``: security is on at this server (its dispatcher has a guard)."""

    def check_enabled() -> None:
        if not enabled:
            raise NoPermissionError(
                f"{dispatcher.server_name} has auth_enable off: it keeps no users or policies (turn auth_enable on "
                "at every server of the cluster first)"
            )

    async def get_table(request: RemotingCommand) -> RemotingCommand:
        check_enabled()
        return request.response(body=pack(store.table.to_wire()))

    async def put_table(request: RemotingCommand) -> RemotingCommand:
        check_enabled()
        adopted = store.adopt(AclTable.from_wire(unpack(request.body)))
        return request.response(ext={"adopted": adopted, "version": store.table.version})

    dispatcher.register(RequestCode.AUTH_GET_TABLE, get_table)
    dispatcher.register(RequestCode.AUTH_PUT_TABLE, put_table)


def reconcile(invoke: Invoke, address: str, store: AclStore, theirs: int) -> None:
    """Bring this server and the one at ``address`` (which holds version ``theirs``) to the
    newer of their two tables."""
    mine = store.table.version
    if theirs > mine:
        table = AclTable.from_wire(unpack(invoke(address, RemotingCommand.request(RequestCode.AUTH_GET_TABLE)).body))
        if store.adopt(table):
            log.info("user table version %d taken from %s (this server had %d)", table.version, address, mine)
    elif theirs < mine:
        invoke(address, RemotingCommand.request(RequestCode.AUTH_PUT_TABLE, body=pack(store.table.to_wire())))
        log.info("user table version %d given to %s (it had %d)", mine, address, theirs)
