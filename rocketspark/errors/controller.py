"""Errors the nameserver's replica-group controller answers with: stale epochs, requests from
the wrong replica, no Raft leader, switchovers it refuses."""

from __future__ import annotations

from rocketspark.errors.server import RequestCodeNotSupported, ServerError
from rocketspark.protocol.codes import ResponseCode


class ControllerNotEnabledError(RequestCodeNotSupported):
    """A controller request reached a nameserver started without ``controller_enable``."""


class ControllerFencedEpochError(ServerError):
    """The request names a master epoch that is no longer the group's: another election or
    switchover won. Re-read the group and decide again."""

    code = int(ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH)


class ControllerFencedSyncStateSetEpochError(ServerError):
    code = int(ResponseCode.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH)


class ControllerInvalidMasterError(ServerError):
    """Only the group's current master may change its SyncStateSet."""

    code = int(ResponseCode.CONTROLLER_INVALID_MASTER)


class ControllerInvalidReplicasError(ServerError):
    code = int(ResponseCode.CONTROLLER_INVALID_REPLICAS)


class ControllerInvalidRequestError(ServerError):
    code = int(ResponseCode.CONTROLLER_INVALID_REQUEST)


class ControllerBrokerNotAliveError(ServerError):
    code = int(ResponseCode.CONTROLLER_BROKER_NOT_ALIVE)


class ControllerNotLeaderError(ServerError):
    """The controller's Raft group has no leader right now (an election is under way, or too
    few nameservers are up), or its leader did not commit in time. Retry shortly."""

    code = int(ResponseCode.CONTROLLER_NOT_LEADER)
    retriable = True


class ControllerGroupNotExistError(ServerError):
    code = int(ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST)


class ControllerNeedRegisterError(ServerError):
    """A heartbeat from a replica the controller has not registered (at that address): the
    broker registers (CONTROLLER_REGISTER_BROKER) and beats again."""

    code = int(ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED)


class ControllerMasterStillExistError(ServerError):
    code = int(ResponseCode.CONTROLLER_MASTER_STILL_EXIST)


class ControllerElectMasterFailedError(ServerError):
    code = int(ResponseCode.CONTROLLER_ELECT_MASTER_FAILED)


class ControllerReplicaIdInvalidError(ServerError):
    """Two processes claim one replica id of a group, or one address two ids."""

    code = int(ResponseCode.CONTROLLER_BROKER_ID_INVALID)
