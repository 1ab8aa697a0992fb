"""The master's side of replication over requests: HA_GET_EPOCHS (history, and where the
HA port is: the log itself travels there, see :mod:`broker.ha.transfer`) and HA_GET_METADATA.

Only the group's master at the epoch the slave names answers; anyone else refuses with
NOT_MASTER, so a slave never copies from a deposed master.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from broker.ha.epochs import EpochFile
from broker.ha.replication import Replication
from broker.ha.role import Role
from broker.store.store import MessageStore
from rocketspark.errors import NotMasterError
from rocketspark.protocol.bodies import pack
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.headers import get_int
from rocketspark.remoting.server import Dispatcher


@dataclass(frozen=True, slots=True)
class HaContext:
    """What the master's replication requests touch."""

    role: Role
    store: MessageStore
    epochs: EpochFile
    replication: Replication


def register(dispatcher: Dispatcher, ctx: HaContext) -> None:
    dispatcher.register(RequestCode.HA_GET_EPOCHS, partial(get_epochs, ctx))
    dispatcher.register(RequestCode.HA_GET_METADATA, partial(get_metadata, ctx))


def _check_master(ctx: HaContext, epoch: int | None) -> None:
    role = ctx.role
    if not role.controller_mode or not role.is_master or (epoch is not None and epoch != role.epoch):
        raise NotMasterError(
            f"replica {role.replica_id} of broker group {role.group} is not its master at epoch "
            f"{epoch if epoch is not None else role.epoch} (it knows master {role.master_address} "
            f"at epoch {role.epoch})"
        )


async def get_epochs(ctx: HaContext, cmd: RemotingCommand) -> RemotingCommand:
    _check_master(ctx, get_int(cmd, "masterEpoch"))
    body = pack([list(e) for e in ctx.epochs.entries])
    store = ctx.store
    ext = {"logEnd": store.log_max_offset, "logMin": store.log_min_offset, "haPort": ctx.replication.server.port}
    return cmd.response(ext=ext, body=body)


async def get_metadata(ctx: HaContext, cmd: RemotingCommand) -> RemotingCommand:
    _check_master(ctx, None)
    return cmd.response(body=ctx.replication.metadata_body())
