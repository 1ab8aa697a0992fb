"""The master's side of replication over requests: HA_GET_EPOCHS (history, and where the
HA port is: the log itself travels there, see :mod:`broker.ha.transfer`) and HA_GET_METADATA.

Only the group's master at the epoch the slave names answers; anyone else refuses with
NOT_MASTER, so a slave never copies from a deposed master.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from rocketspark.errors import NotMasterError
from rocketspark.protocol.codec import pack
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.headers import get_int

if TYPE_CHECKING:
    from broker.server import Broker


def register(broker: Broker) -> None:
    broker.dispatcher.register(RequestCode.HA_GET_EPOCHS, partial(get_epochs, broker))
    broker.dispatcher.register(RequestCode.HA_GET_METADATA, partial(get_metadata, broker))


def _check_master(broker: Broker, epoch: int | None) -> None:
    role = broker.role
    if not role.controller_mode or not role.is_master or (epoch is not None and epoch != role.epoch):
        raise NotMasterError(
            f"replica {role.replica_id} of broker group {role.group} is not its master at epoch "
            f"{epoch if epoch is not None else role.epoch} (it knows master {role.master_address} "
            f"at epoch {role.epoch})"
        )


async def get_epochs(broker: Broker, cmd: RemotingCommand) -> RemotingCommand:
    _check_master(broker, get_int(cmd, "masterEpoch"))
    log = broker.store.commitlog
    body = pack([list(e) for e in broker.epochs.entries])
    ext = {"logEnd": log.max_offset, "logMin": log.min_offset, "haPort": broker.replication.server.port}
    return cmd.response(ext=ext, body=body)


async def get_metadata(broker: Broker, cmd: RemotingCommand) -> RemotingCommand:
    _check_master(broker, None)
    return cmd.response(body=broker.replication.metadata_body())
