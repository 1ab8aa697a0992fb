"""The user-table requests both servers serve: read the table, and offer a newer one.

``rocketspark admin user``/``acl`` read the table from one server, change it, and offer the
result, one version on, to every broker and nameserver (``AUTH_PUT_TABLE``); a server keeps
it only if it is newer than its own. Only super users (and the cluster) may send either
(``rules.SUPER_ONLY``): the table holds secret keys.
"""

from __future__ import annotations

from rocketspark.protocol.codec import pack, unpack
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.remoting.server import Dispatcher
from rocketspark.security.acl import AclTable
from rocketspark.security.store import AclStore


def serve_acl(dispatcher: Dispatcher, store: AclStore) -> None:
    async def get_table(request: RemotingCommand) -> RemotingCommand:
        return request.response(body=pack(store.table.to_wire()))

    async def put_table(request: RemotingCommand) -> RemotingCommand:
        adopted = store.adopt(AclTable.from_wire(unpack(request.body)))
        return request.response(ext={"adopted": adopted, "version": store.table.version})

    dispatcher.register(RequestCode.AUTH_GET_TABLE, get_table)
    dispatcher.register(RequestCode.AUTH_PUT_TABLE, put_table)
