"""Errors raised on this side, without a server's answer: the client's own (configuration,
connectivity, checks of replies, the Spark data source), a configuration's, a local cluster's."""

from __future__ import annotations

from rocketspark.errors.base import RocketSparkError
from rocketspark.protocol.codes import ClientErrorCode, ResponseCode


class ClientError(RocketSparkError):
    """Raised by the client itself: configuration, connectivity, validation of replies."""


class NoNameServerError(ClientError):
    code = int(ClientErrorCode.NO_NAME_SERVER)


class NoRouteInfoError(ClientError):
    code = int(ClientErrorCode.NOT_FOUND_TOPIC)


class ConnectError(ClientError):
    code = int(ClientErrorCode.CONNECT_BROKER_EXCEPTION)
    retriable = True


class TlsError(ConnectError):
    """A connection failed in its TLS handshake: one side without TLS, a certificate from a
    CA the other does not trust, or mutual TLS without a client certificate. Retrying does not
    help; the message says which setting to change."""

    code = int(ClientErrorCode.TLS_FAILED)
    retriable = False


class RequestTimeoutError(ClientError):
    code = int(ClientErrorCode.ACCESS_BROKER_TIMEOUT)
    retriable = True


class InvalidAddressError(ClientError):
    code = int(ClientErrorCode.INVALID_ADDRESS)


class OptionError(ClientError):
    """An option of the rocketmq data source is missing, unknown or has a bad value."""

    code = int(ClientErrorCode.INVALID_OPTION)


class DataLossError(ClientError):
    """Planned offsets are gone (retention, deletion or a lost broker); see failOnDataLoss."""

    code = int(ClientErrorCode.DATA_LOSS)


class DataCorruptedError(ClientError):
    code = int(ResponseCode.DATA_CORRUPTED)


class ConfigError(RocketSparkError, ValueError):
    """A configuration file or value is wrong; the message says which key and why."""

    code = int(ClientErrorCode.INVALID_CONFIG)


class ClusterError(RocketSparkError, RuntimeError):
    """A server of a local cluster failed to start or stop, or a LocalCluster method was used
    in a way it does not support; the message says which and why."""

    code = int(ClientErrorCode.CLUSTER_FAILED)
