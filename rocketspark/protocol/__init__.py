"""The wire protocol shared by clients, brokers and nameservers: codes, commands, codecs, types."""

from rocketspark.protocol.codes import Flag, RequestCode, ResponseCode
from rocketspark.protocol.command import MalformedCommand, RemotingCommand

__all__ = ["Flag", "MalformedCommand", "RemotingCommand", "RequestCode", "ResponseCode"]
